package sock

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// run interprets the steering program for a packet received on cpu: the
// subset of classic BPF that SteerProgram emits.
func run(t *testing.T, p []unix.SockFilter, cpu uint32) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(p); pc++ {
		in := p[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K != skfAdCPU {
				t.Fatalf("insn %d loads %#x, not the CPU", pc, in.K)
			}
			a = cpu
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("insn %d: unexpected code %#x", pc, in.Code)
		}
	}
	t.Fatal("program fell off its end")
	return 0
}

func TestSteerProgram(t *testing.T) {
	cpus := []int{3, 7, 1, 12}
	p := SteerProgram(cpus)
	if len(p) != 2*len(cpus)+2 {
		t.Fatalf("%d instructions for %d queues", len(p), len(cpus))
	}
	for c := range 16 {
		got := run(t, p, uint32(c))
		q, ok := QueueOf(cpus, c)
		switch {
		case ok && got != uint32(q):
			t.Errorf("cpu %d → %d, want queue %d", c, got, q)
		case !ok && got != NoQueue:
			t.Errorf("cpu %d (no queue's) → %d, want NoQueue (flow hash)", c, got)
		}
	}
	// The kernel takes it: attach it to a reuseport socket of a group.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		t.Fatal(err)
	}
	if err := SteerByCPU(fd, cpus); err != nil {
		t.Fatalf("attach: %v", err)
	}
}

func TestSteering(t *testing.T) {
	if s := Steering([]int{0, 1}); s != "reuseport by cpu 0,1" {
		t.Errorf("Steering([0 1]) = %q", s)
	}
	if s := Steering(nil); s != "reuseport by flow hash" {
		t.Errorf("Steering(nil) = %q", s)
	}
}

func TestQueuePort(t *testing.T) {
	if p, err := QueuePort(0, 3); p != 0 || err != nil {
		t.Errorf("QueuePort(0, 3) = %d, %v; want ephemeral", p, err)
	}
	if p, err := QueuePort(6000, 3); p != 6003 || err != nil {
		t.Errorf("QueuePort(6000, 3) = %d, %v", p, err)
	}
	var ce *dgramio.ConfigError
	if _, err := QueuePort(65535, 1); !errors.As(err, &ce) || ce.Field != "LocalPort" {
		t.Errorf("QueuePort(65535, 1): %v, want a ConfigError on LocalPort", err)
	}
}
