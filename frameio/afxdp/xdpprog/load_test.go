package xdpprog

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDropMemlockHint(t *testing.T) {
	err := fmt.Errorf("map x: %w", fmt.Errorf("map create: %w%s", unix.EPERM, memlockHint))
	got := dropMemlockHint(err)
	if strings.Contains(got.Error(), "MEMLOCK") || got.Error() != "map x: map create: operation not permitted" {
		t.Errorf("message %q", got)
	}
	if !errors.Is(got, unix.EPERM) {
		t.Error("no longer matches EPERM")
	}
	plain := fmt.Errorf("load program: %w", unix.EACCES)
	if dropMemlockHint(plain) != plain {
		t.Error("an error without the hint was replaced")
	}
}
