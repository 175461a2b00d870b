package kindcfg_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/kindcfg"
)

// A kind's constructor begins with PrepareOne or PrepareGroup: a prepared
// Config is only checked for its kind, and not validated again; any other
// gets the constructor's kind when it has none, its defaults, and
// Validate's checks.
func TestPrepare(t *testing.T) {
	raw := dgramio.Config{LocalIP: netip.MustParseAddr("198.18.0.1"), Role: dgramio.RoleServer, Port: 5000}
	var ce *dgramio.ConfigError
	c, err := kindcfg.PrepareOne(raw, dgramio.KindUDP)
	if err != nil {
		t.Fatalf("PrepareOne of a Config without Kind: %v", err)
	}
	if c.Kind != dgramio.KindUDP || c.TxBatch != dgramio.DefaultTxBatch || c.Poll != dgramio.PollBusy || !c.Prepared() {
		t.Errorf("PrepareOne: Kind %q, TxBatch %d, Poll %q, prepared %v; want udp with the defaults", c.Kind, c.TxBatch, c.Poll, c.Prepared())
	}
	if _, err := kindcfg.PrepareGroup(c, dgramio.KindTCP); !errors.As(err, &ce) || ce.Field != "Kind" {
		t.Errorf("PrepareGroup(tcp) of a udp Config = %v, want a ConfigError on Kind", err)
	}
	// A prepared Config is not validated again: a field broken after
	// Prepare goes through (the contract is not to do that), which shows
	// that New's validation is the only one.
	broken := c
	broken.TxBatch = 0
	if got, err := kindcfg.PrepareOne(broken, dgramio.KindUDP); err != nil || got.TxBatch != 0 {
		t.Errorf("PrepareOne of a prepared Config validated it again: %v", err)
	}
	if _, err := kindcfg.PrepareOne(kindcfg.ForQueue(c, 0), dgramio.KindUDP); err != nil {
		t.Errorf("a queue's Config (ForQueue) is no longer prepared: %v", err)
	}
	raw.Port = 0
	if _, err := kindcfg.PrepareOne(raw, dgramio.KindUDP); !errors.As(err, &ce) || ce.Field != "Port" {
		t.Errorf("PrepareOne of a Config without Port = %v, want Validate's ConfigError on Port", err)
	}
	if _, err := raw.Prepare(); !errors.As(err, &ce) || ce.Field != "Kind" {
		t.Errorf("Prepare of a Config without Kind = %v, want a ConfigError on Kind", err)
	}
	two := c
	two.Queues = 2
	if _, err := kindcfg.PrepareOne(two, dgramio.KindUDP); !errors.As(err, &ce) || ce.Field != "Queues" {
		t.Errorf("PrepareOne of a two-queue Config = %v, want a ConfigError on Queues", err)
	}
}

func TestForQueue(t *testing.T) {
	c := dgramio.Config{Queues: 4, CPUs: []int{3, 5, 7, 9}, Pcap: "cap"}
	c.XDP.QueueID = 2
	q := kindcfg.ForQueue(c, 2)
	if q.Queues != 1 || len(q.CPUs) != 1 || q.CPUs[0] != 7 || q.XDP.QueueID != 4 || q.Pcap != "cap-q2" {
		t.Errorf("ForQueue(2) = Queues %d CPUs %v QueueID %d Pcap %q; want 1, [7], 4, cap-q2", q.Queues, q.CPUs, q.XDP.QueueID, q.Pcap)
	}
	if q := kindcfg.ForQueue(dgramio.Config{Queues: 2}, 1); q.CPUs != nil || q.Pcap != "" {
		t.Errorf("ForQueue without CPUs or Pcap = CPUs %v Pcap %q", q.CPUs, q.Pcap)
	}
}
