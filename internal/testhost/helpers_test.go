//go:build linux

package testhost

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testutil"
)

func carrier(t *testing.T, h *Host) bool {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().OperState == netlink.OperUp
}

func TestLinkFlap(t *testing.T) {
	p := newT(t, Options{})
	if err := p.A.SetLinkUp(false); err != nil {
		t.Fatal(err)
	}
	if !testutil.Eventually(20*time.Second, func() bool { return !carrier(t, p.A) && !carrier(t, p.B) }) {
		t.Fatal("carrier still up on an end after A went down")
	}
	if err := p.A.SetLinkUp(true); err != nil {
		t.Fatal(err)
	}
	if !testutil.Eventually(20*time.Second, func() bool { return carrier(t, p.A) && carrier(t, p.B) }) {
		t.Fatal("carrier not back after A came up")
	}
	roundTrip(t, p, "after a flap")
}

func TestNeigh(t *testing.T) {
	p := newT(t, Options{})
	fake := net.HardwareAddr{0x02, 0xdd, 0, 0, 0, 1}
	ip := p.B.Addr
	if err := p.A.AddNeigh(ip, fake); err != nil {
		t.Fatal(err)
	}
	mac, state, err := p.A.Neigh(ip)
	if err != nil || mac.String() != fake.String() || state != netlink.NUD_PERMANENT {
		t.Fatalf("Neigh(%s) = %s, state %#x, %v; want %s permanent", ip, mac, state, err, fake)
	}
	if err := p.A.AddNeigh(ip, p.B.MAC); err != nil { // replaces
		t.Fatal(err)
	}
	if mac, _, _ := p.A.Neigh(ip); mac.String() != p.B.MAC.String() {
		t.Errorf("after replace: %s, want %s", mac, p.B.MAC)
	}
	roundTrip(t, p, "with a static neighbour")
	if err := p.A.DelNeigh(ip); err != nil {
		t.Fatal(err)
	}
	if err := p.A.DelNeigh(ip); err != nil {
		t.Errorf("second DelNeigh: %v", err)
	}
	if mac, _, err := p.A.Neigh(netip.MustParseAddr("198.19.255.254")); mac != nil || err != nil {
		t.Errorf("Neigh of an unknown address: %s, %v", mac, err)
	}
}

func TestDelAddAddr(t *testing.T) {
	p := newT(t, Options{})
	v4 := func() []netip.Prefix {
		a, err := p.B.Addrs()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := v4(); len(a) != 1 || a[0] != p.B.Prefix {
		t.Fatalf("B's addresses %v, want %s", a, p.B.Prefix)
	}
	if err := p.B.DelAddr(); err != nil {
		t.Fatal(err)
	}
	if a := v4(); len(a) != 0 {
		t.Fatalf("after DelAddr: %v", a)
	}
	if err := p.B.AddAddr(); err != nil {
		t.Fatal(err)
	}
	if a := v4(); len(a) != 1 || a[0] != p.B.Prefix {
		t.Fatalf("after AddAddr: %v, want %s", a, p.B.Prefix)
	}
	roundTrip(t, p, "address back")
}

func TestPromisc(t *testing.T) {
	p := newT(t, Options{})
	for _, on := range []bool{true, false, true} {
		if err := p.A.SetPromisc(on); err != nil {
			t.Fatal(err)
		}
		if got, err := p.A.Promisc(); err != nil || got != on {
			t.Errorf("Promisc() = %v, %v after SetPromisc(%v)", got, err, on)
		}
	}
	if got, _ := p.B.Promisc(); got {
		t.Error("B became promiscuous with A")
	}
}

func TestReadSysSeesNamespace(t *testing.T) {
	p := newT(t, Options{})
	for _, h := range []*Host{p.A, p.B} {
		s, err := h.ReadSys("/sys/class/net/" + h.Iface + "/ifindex")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(s) != strconv.Itoa(h.Index) {
			t.Errorf("%s: ifindex %q, want %d", h.Iface, s, h.Index)
		}
		if s, err := h.ReadSys("class/net/" + h.Iface + "/carrier"); err != nil || s != "1\n" {
			t.Errorf("%s: carrier %q, %v", h.Iface, s, err)
		}
		if s, err := h.ReadSys("class/net/" + p.Other(h).Iface + "/ifindex"); err == nil {
			t.Errorf("%s sees the other end %s in its sysfs: %q", h.Iface, p.Other(h).Iface, s)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + p.A.Iface); err == nil {
		t.Errorf("the root namespace's sysfs shows %s", p.A.Iface)
	}
	for _, bad := range []string{"", "/", "/sys", "../etc/passwd", "class/../../x"} {
		if _, err := p.A.ReadSys(bad); err == nil {
			t.Errorf("ReadSys(%q) accepted", bad)
		}
	}
	if err := p.A.WriteSys("class/net/"+p.A.Iface+"/tx_queue_len", "500"); err != nil {
		t.Fatal(err)
	}
	l, err := p.A.Link()
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().TxQLen != 500 {
		t.Errorf("tx_queue_len written through WriteSys reads back %d through netlink", l.Attrs().TxQLen)
	}
}

func TestMultiQueue(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		queues int
		cpus   []int
	}{
		{2, nil},
		{4, nil},
		{2, []int{allowed[len(allowed)-1], allowed[0]}},
	} {
		p := newT(t, Options{Queues: tc.queues, XPSCPUs: tc.cpus})
		cpus := tc.cpus
		if cpus == nil {
			cpus = allowed
		}
		for _, h := range []*Host{p.A, p.B} {
			l, err := h.Link()
			if err != nil {
				t.Fatal(err)
			}
			if a := l.Attrs(); a.NumTxQueues != tc.queues || a.NumRxQueues != tc.queues || h.Queues != tc.queues {
				t.Errorf("%s: %d TX, %d RX queues, Host.Queues %d; want %d", h.Iface, a.NumTxQueues, a.NumRxQueues, h.Queues, tc.queues)
			}
			xps, err := h.XPS()
			if err != nil {
				t.Fatal(err)
			}
			for q, got := range xps {
				if want := []int{cpus[q%len(cpus)]}; !slices.Equal(got, want) {
					t.Errorf("%s tx-%d: xps_cpus %v, want %v", h.Iface, q, got, want)
				}
			}
		}
		roundTrip(t, p, "multi-queue")
		p.Close()
	}
}
