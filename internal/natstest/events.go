package natstest

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/linkevent"
)

// ChangeEvents reads the whole change stream (linkevent.Stream) in
// sequence order, every event of every message in turn, whichever shape
// wrote it (linkevent.Decode), failing t when a message does not decode. It
// returns nil while the stream does not exist yet (the relay creates it).
func ChangeEvents(t testing.TB, js jetstream.JetStream) []linkevent.Event {
	t.Helper()
	var out []linkevent.Event
	for _, m := range ChangeMessages(t, js) {
		out = append(out, m.Events...)
	}
	return out
}

// ChangeMessage is one message of the change stream, decoded.
type ChangeMessage struct {
	Seq uint64
	// Version is the message's linkevent.HeaderVersion header (0 when it
	// has none, as in a message written by hand).
	Version uint64
	MsgID   string
	Bytes   int // the message's data length
	Events  []linkevent.Event
}

// ChangeMessages reads the whole change stream message by message, as
// ChangeEvents does.
func ChangeMessages(t testing.TB, js jetstream.JetStream) []ChangeMessage {
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
	var out []ChangeMessage
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get seq %d: %v", seq, err)
		}
		evs, err := linkevent.Decode(msg.Data, nil)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		m := ChangeMessage{Seq: seq, MsgID: msg.Header.Get(jetstream.MsgIDHeader), Bytes: len(msg.Data), Events: evs}
		if h := msg.Header.Get(linkevent.HeaderVersion); h != "" {
			if m.Version, err = strconv.ParseUint(h, 10, 64); err != nil {
				t.Fatalf("seq %d: version header %q: %v", seq, h, err)
			}
		}
		out = append(out, m)
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

// PublishChange publishes ev on the change stream as one JSON event with no
// headers, the shape a control from before batching wrote, failing t on
// error.
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

// PublishChanges publishes evs (a chained run: each one's Prev the version
// before it) as one batch message, the way the relay does: its
// de-duplication id from the first version and its version header the last
// one. It returns the message's stream sequence, failing t on error.
func PublishChanges(t testing.TB, js jetstream.JetStream, evs ...linkevent.Event) uint64 {
	t.Helper()
	var b linkevent.Batch
	for i := range evs {
		if err := b.Add(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	msg := &nats.Msg{Subject: linkevent.Subject, Data: b.Bytes(), Header: nats.Header{}}
	msg.Header.Set(linkevent.HeaderVersion, strconv.FormatUint(b.Last(), 10))
	ack, err := js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(linkevent.MsgID(b.First())))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
