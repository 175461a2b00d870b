package bulk

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/dgramio/dgramio/internal/testutil"
)

// The connection-rate mode refuses what it cannot run before it starts
// anything: rows other than kernel tcp and native tcp-xdp, clients other
// than kernel and native (and native ones holding), bad numbers,
// a side spec that is not one (exit status 2, said on stderr).
func TestConnRateFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--kinds", "tcp-xdp+netstack"},
		{"--kinds", "udp"},
		{"--parallel", "0"},
		{"--repeat", "0"},
		{"--duration", "0s"},
		{"--port", "0"},
		{"--nosuch"},
		{"--clients", "curl"},
		{"--clients", ""},
		{"--clients", "native", "--hold", "10"},
	} {
		var out, errb bytes.Buffer
		if rc := ConnRateMain(args, &out, &errb); rc != 2 || errb.Len() == 0 {
			t.Errorf("connrate %q: status %d, stderr %q; want 2 and a word", args, rc, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if rc := ConnRateSideMain([]string{"{not json"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("connrate-side with a bad spec: status %d, stderr %q", rc, errb.String())
	}
}

func TestFmtCountersSorted(t *testing.T) {
	if got := fmtCounters(map[string]uint64{"b": 2, "a": 1}); got != "a=1 b=2" {
		t.Errorf("fmtCounters: %q", got)
	}
}

// raiseNOFILE raises the soft limit to what the hold mode needs (up to
// the hard one without CAP_SYS_RESOURCE), and says so when that is out of
// reach instead of leaving the client to fail at its limit.
func TestRaiseNOFILE(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	if lim.Max < 64 {
		testutil.Skip(t, fmt.Sprintf("open-file hard limit %d", lim.Max))
	}
	low := syscall.Rlimit{Cur: lim.Max - 32, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	if err := raiseNOFILE(int(lim.Max - 16)); err != nil {
		t.Fatalf("raiseNOFILE(%d) from %d/%d: %v", lim.Max-16, low.Cur, low.Max, err)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur < lim.Max-16 || now.Max < now.Cur {
		t.Errorf("after raiseNOFILE(%d): %d/%d", lim.Max-16, now.Cur, now.Max)
	}
	if err := raiseNOFILE(1 << 40); err == nil {
		t.Errorf("raiseNOFILE(2^40): no error; want the ceiling said")
	}
}

// Where one process may not open the held connections, they are shared
// among client processes, and among kernel servers (SO_REUSEPORT) with a
// quarter to spare.
func TestHoldProcs(t *testing.T) {
	for _, c := range []struct{ hold, per, cli, srv int }{
		{1000, 20000, 1, 1},
		{19744, 20000, 1, 1},
		{25000, 20000, 2, 2},
		{40000, 20000, 3, 3},
		{100000, 20000, 6, 7},
	} {
		if cli, srv := holdProcs(c.hold, c.per); cli != c.cli || srv != c.srv {
			t.Errorf("holdProcs(%d, %d) = %d, %d; want %d, %d", c.hold, c.per, cli, srv, c.cli, c.srv)
		}
	}
}

// The connection-rate mode over the veth: the kernel listener and the
// native engine, each with kernel and native clients, serve every
// connection they are offered (no failure in the table); and the hold
// mode holds every connection and reports the native server's heap.
func TestConnRateVeth(t *testing.T) {
	testutil.RequireRoot(t)
	var out, errb bytes.Buffer
	if rc := ConnRateMain([]string{"--kinds", "tcp,tcp-xdp", "--clients", "kernel,native", "--duration", "1s", "--parallel", "4", "--port", "7300"}, &out, &errb); rc != 0 {
		t.Fatalf("connrate: status %d\n%s\n%s", rc, out.String(), errb.String())
	}
	t.Logf("\n%s", out.String())
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Split(l, " | ")
		if len(f) != 9 || f[0] == "| server" || strings.HasPrefix(f[0], "|---") {
			continue
		}
		rows++
		if f[2] == "—" || f[5] != "" {
			t.Errorf("row %q: no rate, or failures", l)
		}
	}
	if rows != 4 {
		t.Errorf("%d rows, want 4:\n%s", rows, out.String())
	}
	out.Reset()
	if rc := ConnRateMain([]string{"--kinds", "tcp-xdp", "--hold", "300", "--parallel", "8", "--port", "7310"}, &out, &errb); rc != 0 {
		t.Fatalf("connrate --hold: status %d\n%s\n%s", rc, out.String(), errb.String())
	}
	if s := out.String(); !strings.Contains(s, "client held 300 of 300") || !strings.Contains(s, "server: 300 answered, heap") {
		t.Errorf("hold: %s", s)
	}
}
