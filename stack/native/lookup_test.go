package native

import "testing"

// TestLookupForgets: the flow table's one-entry memory (lookup) never
// outlives the entry: a tuple removed and taken again by another slot
// (a connection closed and a new one on the same four-tuple, RFC 9293
// §3.10.7.4's TIME-WAIT reuse) is found at the new slot, and a removed
// tuple is not found at all.
func TestLookupForgets(t *testing.T) {
	e := &Engine{table: map[tuple]int32{}, lastIdx: -1}
	a := tuple{raddr: [4]byte{198, 18, 0, 2}, lport: 80, rport: 40000}
	b := tuple{raddr: [4]byte{198, 18, 0, 2}, lport: 80, rport: 40001}
	e.table[a], e.table[b] = 3, 4
	for _, c := range []struct {
		t    tuple
		want int32
	}{{a, 3}, {a, 3}, {b, 4}, {a, 3}} {
		if i, ok := e.lookup(c.t); !ok || i != c.want {
			t.Fatalf("lookup %v: %d %v, want %d", c.t, i, ok, c.want)
		}
	}
	e.unlist(a)
	if i, ok := e.lookup(a); ok {
		t.Fatalf("removed tuple found at %d", i)
	}
	e.table[a] = 7
	if i, ok := e.lookup(a); !ok || i != 7 {
		t.Fatalf("tuple taken again: %d %v, want 7", i, ok)
	}
	e.unlist(b) // not the remembered one
	if i, ok := e.lookup(a); !ok || i != 7 {
		t.Fatalf("after removing another tuple: %d %v, want 7", i, ok)
	}
	if _, ok := e.lookup(b); ok {
		t.Fatal("removed tuple b found")
	}
}
