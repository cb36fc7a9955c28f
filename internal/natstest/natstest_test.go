package natstest

import (
	"fmt"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// A restarted server comes back on its port, and a client reconnects.
func TestRestartKeepsPort(t *testing.T) {
	s := Start(t)
	nc, _ := s.Connect(t)
	url := s.ClientURL()
	s.Restart(t)
	if got := s.ClientURL(); got != url {
		t.Fatalf("restarted on %s, want %s", got, url)
	}
	WaitConnected(t, nc, readyWithin)
}

// Both shapes of change message read back as one run of events, in order.
func TestChangeMessagesBothShapes(t *testing.T) {
	_, js := Start(t).Connect(t)
	ChangeStream(t, js)
	ev := func(v uint64) linkevent.Event {
		return linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink, Code: fmt.Sprintf("code%02d", v),
			URL: "https://example.com/", RedirectType: 302, Status: link.Active}
	}
	one := ev(1)
	PublishChange(t, js, &one)
	if seq := PublishChanges(t, js, ev(2), ev(3), ev(4)); seq != 2 {
		t.Fatalf("batch stored at sequence %d, want 2", seq)
	}
	msgs := ChangeMessages(t, js)
	got := make([]string, len(msgs))
	for i, m := range msgs {
		got[i] = fmt.Sprintf("seq %d version %d id %q events %d", m.Seq, m.Version, m.MsgID, len(m.Events))
	}
	want := []string{`seq 1 version 0 id "" events 1`, `seq 2 version 4 id "v2" events 3`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages %q, want %q", got, want)
	}
	var versions []uint64
	for _, e := range ChangeEvents(t, js) {
		versions = append(versions, e.Version)
	}
	if fmt.Sprint(versions) != "[1 2 3 4]" {
		t.Fatalf("events %v, want [1 2 3 4]", versions)
	}
}
