package linkevent

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

// run is a chained run of every kind of event, holes in the versions
// included (rolled-back transactions), on several domains: the same code
// on two of them is two links.
func run() []Event {
	return []Event{
		{Version: 41, Prev: 40, Kind: KindLink, Code: "00000A", URL: "https://example.com/a?utm_source=x", RedirectType: 302, Status: link.Active},
		{Version: 42, Prev: 41, Kind: KindLink, Code: "00000a", Status: link.Deleted},
		{Version: 45, Prev: 42, Kind: KindLink, Code: "summer-sale", URL: "https://example.com/", RedirectType: 307, Status: link.Active, ExpiresAt: 1893456000000},
		{Version: 46, Prev: 45, Kind: KindLink, Code: "old_one", URL: "https://example.com/old", RedirectType: 301, Status: link.Disabled, ExpiresAt: -1},
		{Version: 47, Prev: 46, Kind: KindSegment, Namespace: "default", SegStart: 1, SegEnd: 100_001, SegState: SegmentOpened},
		{Version: 50, Prev: 47, Kind: KindDomain, Conf: &link.Domain{ID: 7, Host: "go.acme.com", TenantID: 3, RootRedirect: "https://acme.com/",
			NotFoundRedirect: "https://acme.com/404?from=short", Robots: "User-agent: *\nAllow: /\n", CodeMode: link.CodesFF1,
			KeyIDs: []string{"k2026", "k2025.old"}, Status: link.DomainActive, Version: 50}},
		{Version: 51, Prev: 50, Kind: KindLink, Domain: 7, Code: "00000A", URL: "https://acme.com/a", RedirectType: 302, Status: link.Active},
		{Version: 52, Prev: 51, Kind: KindLink, Domain: link.MaxDomainID, Code: "summer-sale", URL: "https://b.example/", RedirectType: 308, Status: link.Active},
		{Version: 53, Prev: 52, Kind: KindDomain, Conf: &link.Domain{ID: 0, Host: "s.example.net", CodeMode: link.CodesSequential,
			Status: link.DomainActive, Version: 53}},
		{Version: 54, Prev: 53, Kind: KindDomain, Conf: &link.Domain{ID: 9, Host: "xn--bcher-kva.example", TenantID: 1 << 40,
			CodeMode: link.CodesSequential, Status: link.DomainRemoved, Version: 54}},
		{Version: 1 << 40, Prev: 54, Kind: KindSegment, Namespace: "campaigns", SegStart: 62*62*62*62*62*62 - 10, SegEnd: 62 * 62 * 62 * 62 * 62 * 62, SegState: SegmentSealed},
	}
}

// format1 is a batch as a control from before domains wrote it (format 1,
// written by that release's Batch): it must keep decoding, every link on
// the platform's domain.
const format1 = "010400000028010101dc0400063030303030412268747470733a2f2f6578616d706c652e636f6d2f613f75746d5f736f757263653d78" +
	"01010300000630303030306100030101e60480d0adac9b6e0b73756d6d65722d73616c651468747470733a2f2f6578616d706c652e636f6d2f" +
	"0202020764656661756c7401a08d06"

func TestDecodeFormat1(t *testing.T) {
	msg, err := hex.DecodeString(format1)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Version: 41, Prev: 40, Kind: KindLink, Code: "00000A", URL: "https://example.com/a?utm_source=x", RedirectType: 302, Status: link.Active},
		{Version: 42, Prev: 41, Kind: KindLink, Code: "00000a", Status: link.Deleted},
		{Version: 45, Prev: 42, Kind: KindLink, Code: "summer-sale", URL: "https://example.com/", RedirectType: 307, Status: link.Active, ExpiresAt: 1893456000000},
		{Version: 47, Prev: 45, Kind: KindSegment, Namespace: "default", SegStart: 1, SegEnd: 100_001, SegState: SegmentSealed},
	}
	got, err := Decode(msg, nil)
	if err != nil {
		t.Fatalf("Decode of a format 1 batch: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("format 1 batch (-want +got):\n%s", diff)
	}
	// Format 1 has no domain events: kind 3 there is corruption, not a
	// domain.
	bad := bytes.Clone(msg)
	bad[batchHeader+2] = kindDomain
	if got, err := Decode(bad, nil); err == nil {
		t.Errorf("a domain kind in format 1 decoded to %+v", got)
	}
}

func encode(t testing.TB, events []Event) []byte {
	t.Helper()
	var b Batch
	for i := range events {
		if err := b.Add(&events[i]); err != nil {
			t.Fatalf("Add(%+v): %v", events[i], err)
		}
	}
	return bytes.Clone(b.Bytes())
}

func TestBatchRoundTrip(t *testing.T) {
	want := run()
	for n := 1; n <= len(want); n++ {
		msg := encode(t, want[:n])
		if msg[0] != FormatBatch {
			t.Fatalf("batch starts with %#x, want the format byte %#x", msg[0], FormatBatch)
		}
		got, err := Decode(msg, nil)
		if err != nil {
			t.Fatalf("Decode of %d events: %v", n, err)
		}
		if diff := cmp.Diff(want[:n], got); diff != "" {
			t.Errorf("round trip of %d events (-want +got):\n%s", n, diff)
		}
	}
}

// TestDecodeSingleJSON: a stream written by a control from before batching
// (one JSON event per message) reads as runs of one event.
func TestDecodeSingleJSON(t *testing.T) {
	for _, e := range run() {
		msg, err := Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(msg, nil)
		if err != nil {
			t.Fatalf("Decode(%s): %v", msg, err)
		}
		if diff := cmp.Diff([]Event{e}, got); diff != "" {
			t.Errorf("Decode(%s) (-want +got):\n%s", msg, diff)
		}
	}
	// As written by hand, with white space first.
	got, err := Decode([]byte(" \n{\"v\":3,\"p\":1,\"k\":\"link\",\"c\":\"00000A\",\"s\":\"active\",\"u\":\"https://x\",\"t\":302}"), nil)
	if err != nil || len(got) != 1 || got[0].Version != 3 || got[0].Prev != 1 {
		t.Fatalf("Decode of indented JSON = %+v, %v", got, err)
	}
}

func TestBatchSizes(t *testing.T) {
	var b Batch
	events := run()
	for i := range events {
		before := b.Size()
		if err := b.Add(&events[i]); err != nil {
			t.Fatal(err)
		}
		added := b.Size() - before
		if i == 0 {
			added -= batchHeader + uvarintLen(events[0].Prev)
		}
		if got := EncodedSize(&events[i]); got != added {
			t.Errorf("EncodedSize(%+v) = %d, Add added %d", events[i], got, added)
		}
	}
	if b.Size() > BatchOverhead+sizes(events) {
		t.Errorf("batch of %d bytes exceeds BatchOverhead + EncodedSize = %d", b.Size(), BatchOverhead+sizes(events))
	}
	if b.Len() != len(events) || b.First() != events[0].Version || b.Last() != events[len(events)-1].Version {
		t.Errorf("Len, First, Last = %d, %d, %d", b.Len(), b.First(), b.Last())
	}
	b.Reset()
	if b.Len() != 0 || b.Bytes() != nil {
		t.Errorf("after Reset: %d events, %d bytes", b.Len(), len(b.Bytes()))
	}
	// Reused after Reset, the buffer encodes the same as a fresh batch.
	for i := range events[3:] {
		if err := b.Add(&events[3+i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(b.Bytes(), encode(t, events[3:])) {
		t.Error("a reset batch encodes differently from a new one")
	}
}

func sizes(events []Event) int {
	n := 0
	for i := range events {
		n += EncodedSize(&events[i])
	}
	return n
}

func TestBatchAddRefuses(t *testing.T) {
	var b Batch
	first := Event{Version: 10, Prev: 7, Kind: KindLink, Code: "00000A", URL: "https://x/", RedirectType: 302, Status: link.Active}
	if err := b.Add(&first); err != nil {
		t.Fatal(err)
	}
	before := bytes.Clone(b.Bytes())
	for name, e := range map[string]Event{
		"not chained":    {Version: 12, Prev: 11, Kind: KindLink, Code: "00000B", Status: link.Deleted},
		"version behind": {Version: 9, Prev: 10, Kind: KindLink, Code: "00000B", Status: link.Deleted},
		"invalid":        {Version: 11, Prev: 10, Kind: KindLink, Code: "a/b", Status: link.Deleted},
		"url too long":   {Version: 11, Prev: 10, Kind: KindLink, Code: "00000B", URL: "https://x/" + strings.Repeat("a", maxURL), RedirectType: 302, Status: link.Active},
	} {
		if err := b.Add(&e); !errors.Is(err, errInvalid) {
			t.Errorf("Add %s (%+v) = %v, want an invalid-event error", name, e, err)
		}
	}
	if !bytes.Equal(before, b.Bytes()) || b.Len() != 1 || b.Last() != 10 {
		t.Errorf("a refused Add changed the batch: %d events, last %d", b.Len(), b.Last())
	}
}

func TestDecodeRejects(t *testing.T) {
	valid := encode(t, run())
	withCount := func(n uint32) []byte {
		b := bytes.Clone(valid)
		binary.LittleEndian.PutUint32(b[1:batchHeader], n)
		return b
	}
	// A link event after prev 0, byte by byte, with one field replaced.
	linkEventIn := func(domain uint64, delta, kind, status byte, code, url string) []byte {
		b := []byte{FormatBatch, 1, 0, 0, 0, 0, delta, kind, status}
		b = binary.AppendVarint(b, 302)
		b = binary.AppendVarint(b, 0)
		b = binary.AppendUvarint(b, domain)
		b = appendString(b, code)
		return appendString(b, url)
	}
	linkEvent := func(delta, kind, status byte, code, url string) []byte {
		return linkEventIn(0, delta, kind, status, code, url)
	}
	// A domain event after prev 0, with its fields given.
	domainEvent := func(status, mode byte, id uint64, host string, keys ...string) []byte {
		b := []byte{FormatBatch, 1, 0, 0, 0, 0, 1, kindDomain, status, mode}
		b = binary.AppendUvarint(b, id)
		b = binary.AppendUvarint(b, 4)
		b = appendString(b, host)
		b = appendString(b, "")
		b = appendString(b, "")
		b = appendString(b, "")
		b = binary.AppendUvarint(b, uint64(len(keys)))
		for _, k := range keys {
			b = appendString(b, k)
		}
		return b
	}
	if _, err := Decode(domainEvent(domainActive, modeFF1, 3, "go.acme.com", "k1"), nil); err != nil {
		t.Fatalf("the hand-built domain event itself is refused: %v", err)
	}

	const url = "https://x/"
	if _, err := Decode(linkEvent(1, kindLink, statusActive, "00000A", url), nil); err != nil {
		t.Fatalf("the hand-built event itself is refused: %v", err)
	}
	if _, err := Decode(linkEventIn(uint64(link.MaxDomainID), 1, kindLink, statusActive, "00000A", url), nil); err != nil {
		t.Fatalf("the hand-built event on the last domain is refused: %v", err)
	}
	cases := map[string][]byte{
		"header only":         valid[:batchHeader-1],
		"no prev":             valid[:batchHeader],
		"count zero":          withCount(0),
		"count too high":      withCount(uint32(len(run()) + 1)),
		"count too low":       withCount(uint32(len(run()) - 1)),
		"count huge":          withCount(1 << 31),
		"trailing byte":       append(bytes.Clone(valid), 0),
		"version delta 0":     linkEvent(0, kindLink, statusActive, "00000A", url),
		"unknown kind":        linkEvent(1, 9, statusActive, "00000A", url),
		"unknown status":      linkEvent(1, kindLink, 7, "00000A", url),
		"bad code":            linkEvent(1, kindLink, statusActive, "a b", url),
		"code too long":       linkEvent(1, kindLink, statusActive, strings.Repeat("a", link.MaxCodeLen+1), url),
		"active no url":       linkEvent(1, kindLink, statusActive, "00000A", ""),
		"unknown format":      {0x04, 1, 0, 0, 0, 0},
		"domain too large":    linkEventIn(uint64(link.MaxDomainID)+1, 1, kindLink, statusActive, "00000A", url),
		"domain status":       domainEvent(7, modeFF1, 3, "go.acme.com", "k1"),
		"code mode":           domainEvent(domainActive, 9, 3, "go.acme.com", "k1"),
		"domain id too large": domainEvent(domainActive, modeFF1, uint64(link.MaxDomainID)+1, "go.acme.com", "k1"),
		"host upper case":     domainEvent(domainActive, modeFF1, 3, "Go.Acme.com", "k1"),
		"host with port":      domainEvent(domainActive, modeFF1, 3, "go.acme.com:80", "k1"),
		"host empty":          domainEvent(domainActive, modeSequential, 3, ""),
		"ff1 without keys":    domainEvent(domainActive, modeFF1, 3, "go.acme.com"),
		"bad key id":          domainEvent(domainActive, modeFF1, 3, "go.acme.com", "k 1"),
		"too many key ids":    domainEvent(domainActive, modeFF1, 3, "go.acme.com", "a", "b", "c", "d", "e", "f", "g", "h", "i"),
		"json not an event":   []byte(`[1]`),
		"empty":               nil,
	}
	// Every cut of a valid batch is refused, never read as fewer events.
	for i := 0; i < len(valid); i++ {
		cases[fmt.Sprintf("cut at byte %d", i)] = valid[:i]
	}
	for name, msg := range cases {
		got, err := Decode(msg, make([]Event, 0, 8))
		if err == nil {
			t.Errorf("Decode %s (% x) = %d events, nil; want an error", name, msg, len(got))
		} else if len(got) != 0 {
			t.Errorf("Decode %s: error %v with %d events; want none", name, err, len(got))
		}
	}
}

// TestDecodeReusesDst: a caller decoding message after message into one
// slice allocates nothing for the slice once it is large enough.
func TestDecodeReusesDst(t *testing.T) {
	msg := encode(t, run())
	dst := make([]Event, 0, 16)
	got, err := Decode(msg, dst)
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &dst[:1][0] {
		t.Error("Decode did not decode into dst's array")
	}
}

// normal is e as a batch carries it: the fields of its kind only.
func normal(e Event) Event {
	switch e.Kind {
	case KindLink:
		e.Namespace, e.SegStart, e.SegEnd, e.SegState, e.Conf = "", 0, 0, "", nil
	case KindSegment:
		e.Domain, e.Code, e.URL, e.RedirectType, e.Status, e.ExpiresAt, e.Conf = 0, "", "", 0, "", 0, nil
	case KindDomain:
		c := *e.Conf
		c.Version = e.Version
		if len(c.KeyIDs) == 0 {
			c.KeyIDs = nil
		}
		e = Event{Version: e.Version, Prev: e.Prev, Kind: KindDomain, Conf: &c}
	}
	return e
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(f, run()))
	f.Add(encode(f, run()[:1]))
	f.Add(encode(f, run()[4:]))
	f.Add(encode(f, runExtras(f)))
	f.Add([]byte(`{"v":1,"k":"link","c":"00000A","s":"active","u":"https://x","t":302}`))
	f.Add([]byte(`{"v":4,"p":2,"k":"segment","ns":"default","ss":1,"se":1001,"st":"sealed"}`))
	f.Add([]byte(`{"v":5,"p":4,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"ff1","key_ids":["k1"],"status":"active"}}`))
	f.Add([]byte(`{"v":6,"p":5,"k":"link","d":3,"c":"00000A","s":"active","u":"https://x","t":302}`))
	old, _ := hex.DecodeString(format1)
	f.Add(old)
	f.Fuzz(func(t *testing.T, msg []byte) {
		events, err := Decode(msg, nil)
		if err != nil {
			if len(events) != 0 {
				t.Fatalf("error %v with %d events", err, len(events))
			}
			return
		}
		if len(events) == 0 {
			t.Fatalf("Decode(% x) accepted a message of no events", msg)
		}
		// Whatever is accepted chains, and survives a batch round trip
		// as a batch carries it.
		want := make([]Event, len(events))
		for i, e := range events {
			if i > 0 && e.Prev != events[i-1].Version {
				t.Fatalf("event %d: prev %d after version %d", i, e.Prev, events[i-1].Version)
			}
			want[i] = normal(e)
		}
		var b Batch
		for i := range want {
			if err := b.Add(&want[i]); err != nil {
				if len(want[i].URL) > maxURL {
					return // a JSON event may carry a URL no batch takes
				}
				t.Fatalf("accepted %+v but cannot batch it: %v", want[i], err)
			}
		}
		again, err := Decode(b.Bytes(), nil)
		if err != nil {
			t.Fatalf("re-encoded batch refused: %v", err)
		}
		if diff := cmp.Diff(want, again); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

// A marketing batch's message: 1,000 link creates.
func benchRun() []Event {
	events := make([]Event, 1000)
	for i := range events {
		events[i] = Event{Version: uint64(1000 + i), Prev: uint64(999 + i), Kind: KindLink,
			Code: fmt.Sprintf("%06d", i), URL: fmt.Sprintf("https://example.com/landing?utm_source=mail&utm_campaign=winter&u=%d", i),
			RedirectType: 302, Status: link.Active}
	}
	return events
}

func BenchmarkDecodeBatch(b *testing.B) {
	msg := encode(b, benchRun())
	dst := make([]Event, 0, 1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		var err error
		if dst, err = Decode(msg, dst); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecodeJSON is the shape before batching, for comparison: one
// message per event.
func BenchmarkDecodeJSON(b *testing.B) {
	events := benchRun()
	msgs := make([][]byte, len(events))
	for i := range events {
		var err error
		if msgs[i], err = Marshal(&events[i]); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]Event, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range msgs {
			var err error
			if dst, err = Decode(m, dst); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkEncodeBatch(b *testing.B) {
	events := benchRun()
	var batch Batch
	b.ReportAllocs()
	for b.Loop() {
		batch.Reset()
		for i := range events {
			if err := batch.Add(&events[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
}
