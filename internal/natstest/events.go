package natstest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/linkevent"
)

// ChangeEvents reads the whole change stream (linkevent.Stream) in
// sequence order, failing t when a message does not decode. It returns nil
// while the stream does not exist yet (the relay creates it).
func ChangeEvents(t testing.TB, js jetstream.JetStream) []linkevent.Event {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, linkevent.Stream)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []linkevent.Event
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get seq %d: %v", seq, err)
		}
		var ev linkevent.Event
		if err := linkevent.Unmarshal(msg.Data, &ev); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		out = append(out, ev)
	}
	return out
}
