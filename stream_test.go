package dgramio

import (
	"errors"
	"testing"
)

// Framing and Events apply to the stream kinds: there a Config takes
// either framing and events (u16 by default); a datagram kind takes the
// default framing only and no events, and says so with a *ConfigError
// naming the field.
func TestFramingAndEventsByKind(t *testing.T) {
	for _, k := range Kinds() {
		c := validClient(k)
		if k.IsStream() && c.Framing != FramingU16 {
			t.Errorf("kind %s: default framing %q, want u16", k, c.Framing)
		}
		for _, f := range []Framing{"", FramingU16, FramingRaw, FramingU32, "u64"} {
			for _, ev := range []bool{false, true} {
				c := validClient(k)
				c.Framing, c.Events = f, ev
				err := c.Validate()
				ok := f != "u64" && (k.IsStream() || ((f == "" || f == FramingU16) && !ev))
				var ce *ConfigError
				switch {
				case ok && err != nil:
					t.Errorf("kind %s framing %q events %v: %v", k, f, ev, err)
				case !ok && (!errors.As(err, &ce) || (ce.Field != "Framing" && ce.Field != "Events")):
					t.Errorf("kind %s framing %q events %v: %v, want a ConfigError on Framing or Events", k, f, ev, err)
				}
			}
		}
	}
	if FramingU16.String() != "u16" || Framing("").String() != "u16" || FramingRaw.String() != "raw" {
		t.Error("Framing.String")
	}
}

// Every Event has its name.
func TestEventNames(t *testing.T) {
	want := map[Event]string{EventData: "data", EventOpened: "opened", EventPeerFIN: "peer-fin",
		EventReset: "reset", EventEnded: "ended", EventStalled: "stalled", Event(9): "event(9)"}
	for e, s := range want {
		if e.String() != s {
			t.Errorf("Event %d: %q, want %q", uint8(e), e.String(), s)
		}
	}
}
