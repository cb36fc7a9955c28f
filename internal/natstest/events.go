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

// ChangeStream creates the change stream (linkevent.Stream on
// linkevent.Subject, the server's defaults otherwise), failing t on error.
func ChangeStream(t testing.TB, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: linkevent.Stream, Subjects: []string{linkevent.Subject}})
	if err != nil {
		t.Fatalf("natstest: create the change stream: %v", err)
	}
	return s
}

// PublishChange publishes ev on the change stream, failing t on error.
func PublishChange(t testing.TB, js jetstream.JetStream, ev *linkevent.Event) {
	t.Helper()
	b, err := linkevent.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), linkevent.Subject, b); err != nil {
		t.Fatal(err)
	}
}
