package bulk

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/cpu"
)

// TestMainUsage: every bad flag is refused with status 2 and a message
// naming it, before anything starts; --help is status 0.
func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kinds", "udp"}, "stream kinds"},
		{[]string{"--kinds", "tcp+netstack"}, "no variants"},
		{[]string{"--kinds", "tcp-xdp+sqpoll"}, "engines"},
		{[]string{"--kinds", "tcp,tcp"}, "named twice"},
		{[]string{"--kinds", ","}, "at least one"},
		{[]string{"--conns", "0"}, "--conns"},
		{[]string{"--conns", "1,x"}, "--conns"},
		{[]string{"--conns", "100000"}, "--conns"},
		{[]string{"--dir", "sideways"}, "--dir"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--duration", "-1s"}, "--duration"},
		{[]string{"--bytes", "12XB"}, "--bytes"},
		{[]string{"--bytes", "0"}, "--bytes"},
		{[]string{"--repeat", "0"}, "--repeat"},
		{[]string{"--loss", "1"}, "--loss"},
		{[]string{"--loss", "100%"}, "--loss"},
		{[]string{"--loss", "-1%"}, "--loss"},
		{[]string{"--loss", "1%", "--delay", "fast"}, "--delay"},
		{[]string{"--loss", "1%", "--delay", "2s"}, "--delay"},
		{[]string{"--delay", "10ms"}, "give --loss"},
		{[]string{"--loss", "1%", "--offloads"}, "--offloads"},
		{[]string{"--poll", "spin"}, "--poll"},
		{[]string{"--cc", "vegas"}, "--cc"},
		{[]string{"--buf", "1KiB"}, "--buf"},
		{[]string{"--buf", "lots"}, "--buf"},
		{[]string{"--port", "0"}, "--port"},
		{[]string{"--queues", "0"}, "--queues 0"},
		{[]string{"--queues", "65"}, "--queues 65"},
		{[]string{"--queues", "2", "--loss", "1%"}, "lossy wire has one queue"},
		{[]string{"--queues", "2", "--kinds", "tcp,tcp-xdp+netstack"}, "tcp-xdp+netstack runs one queue"},
		{[]string{"--queues", "2", "--kinds", "tcp-xdp", "--cpus", "0,1"}, "--cpus"},
		{[]string{"--queues", "2", "--kinds", "tcp-xdp", "--cpus", "0;1"}, "--cpus"},
		{[]string{"--queues", "2", "--kinds", "tcp-xdp", "--cpus", "0,1;0,x"}, "--cpus"},
		{[]string{"--queues", "2", "--kinds", "tcp-xdp", "--poll", "busy", "--cpus", "0,1;1,2"}, "CPU 1 would run two"},
		{[]string{"--cpus", "0;1"}, "give --queues"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var out, errb bytes.Buffer
		if got := Main(tc.args, &out, &errb); got != 2 {
			t.Errorf("%q: status %d, want 2 (stderr %q)", tc.args, got, errb.String())
			continue
		}
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: stderr %q does not name %q", tc.args, errb.String(), tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%q: wrote %q on stdout", tc.args, out.String())
		}
	}
	var out, errb bytes.Buffer
	if got := Main([]string{"--help"}, &out, &errb); got != 0 || !strings.Contains(errb.String(), "--loss") {
		t.Errorf("--help: status %d, stderr %q", got, errb.String())
	}
}

// TestParseOptions: the lists, sizes and rates parse into what Run takes.
func TestParseOptions(t *testing.T) {
	var errb bytes.Buffer
	o, js, err := parseOptions([]string{"--kinds", "tcp, tcp-xdp,tcp-xdp+netstack", "--conns", "1,16", "--dir", "up,both",
		"--bytes", "64MiB", "--loss", "0.1%,1%,3%", "--delay", "0.2ms,10ms", "--json", "-", "--repeat", "3", "--cc", "bbr", "--buf", "4MiB"}, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rows) != 3 || o.Rows[1].String() != "tcp-xdp" || o.Rows[2].String() != "tcp-xdp+netstack" || !o.Rows[0].IsKernel() {
		t.Errorf("rows %v", o.Rows)
	}
	if len(o.Conns) != 2 || o.Conns[1] != 16 || len(o.Dirs) != 2 || o.Dirs[1] != Both || o.Bytes != 64<<20 || o.Repeat != 3 || js != "-" || o.CC != "bbr" || o.Buf != 4<<20 {
		t.Errorf("options %+v json %q", o, js)
	}
	if len(o.Loss) != 3 || o.Loss[0] != 0.001 || o.Loss[2] != 0.03 || len(o.Delays) != 2 || o.Delays[0] != 200*time.Microsecond {
		t.Errorf("loss %v delays %v", o.Loss, o.Delays)
	}
	o, _, err = parseOptions([]string{"--kinds", "tcp,tcp-xdp", "--queues", "2", "--cpus", "0,1;0,1"}, &errb)
	if err != nil || o.Queues != 2 || len(o.ClientCPUs) != 2 || o.ClientCPUs[1] != 1 || len(o.ServerCPUs) != 2 || o.ServerCPUs[0] != 0 {
		t.Errorf("--queues 2 --cpus: %+v (%v)", o, err)
	}
	// Without --cpus: a CPU each for the client's loops and the server's
	// while there are enough, the allowed ones in turn beyond.
	o, _, err = parseOptions([]string{"--kinds", "tcp-xdp", "--queues", "3"}, &errb)
	if err != nil || len(o.ClientCPUs) != 3 || len(o.ServerCPUs) != 3 {
		t.Fatalf("--queues 3: %+v (%v)", o, err)
	}
	if allowed, err := cpu.Allowed(); err == nil && len(allowed) >= 6 && (o.ClientCPUs[0] != allowed[0] || o.ServerCPUs[0] != allowed[3]) {
		t.Errorf("--queues 3 on CPUs %v: client %v server %v", allowed, o.ClientCPUs, o.ServerCPUs)
	}
	o, _, err = parseOptions(nil, &errb)
	if err != nil || len(o.Rows) != len(DefaultRows) || o.Duration != 5*time.Second || len(o.Loss) != 0 || o.Busy || o.CC != "" {
		t.Errorf("defaults %+v (%v)", o, err)
	}
}
