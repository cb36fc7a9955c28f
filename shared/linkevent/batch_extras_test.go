package linkevent

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

// format2Run is encode(run()) as the release before extras wrote it
// (format 2): a message without extras must stay byte for byte the same,
// so edges of that release keep reading every message until a link has
// extras.
const format2Run = "020b00000028010101dc040000063030303030412268747470733a2f2f6578616d706c652e636f6d2f613f75746d5f736f757263653d780101030000000630303030306100030101e60480d0adac9b6e000b73756d6d65722d73616c651468747470733a2f2f6578616d706c652e636f6d2f010102da040100076f6c645f6f6e651768747470733a2f2f6578616d706c652e636f6d2f6f6c640102010764656661756c7401a08d060303010207030b676f2e61636d652e636f6d1168747470733a2f2f61636d652e636f6d2f1f68747470733a2f2f61636d652e636f6d2f3430343f66726f6d3d73686f727417557365722d6167656e743a202a0a416c6c6f773a202f0a02056b32303236096b323032352e6f6c64010101dc040007063030303030411268747470733a2f2f61636d652e636f6d2f61010101e80400ffffff070b73756d6d65722d73616c651268747470733a2f2f622e6578616d706c652f0103010100000d732e6578616d706c652e6e657400000000010302010980808080802015786e2d2d62636865722d6b76612e6578616d706c6500000000caffffffff1f02020963616d706169676e73b6a0bbccd3010a"

// extras returns the wire form of x.
func extras(t testing.TB, x link.Extras) string {
	t.Helper()
	b, err := link.AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const testHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"

// runExtras is run() with links that carry extras among the plain ones.
func runExtras(t testing.TB) []Event {
	events := run()
	events[0].Extras = extras(t, link.Extras{MaxClicks: 1000})
	events[3].Extras = extras(t, link.Extras{PasswordHash: testHash}) // a disabled link keeps its extras
	events[6].Extras = extras(t, link.Extras{Rules: []link.Rule{
		{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Countries: []string{"DE", "FR"}, Languages: []string{"de"}, Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "mail"}}, URL: "https://acme.de/"},
	}, PasswordHash: testHash, MaxClicks: 1})
	return events
}

func TestBatchWithoutExtrasIsFormat2(t *testing.T) {
	if got := hex.EncodeToString(encode(t, run())); got != format2Run {
		t.Errorf("a batch without extras changed:\n got %s\nwant %s", got, format2Run)
	}
}

func TestBatchExtrasRoundTrip(t *testing.T) {
	want := runExtras(t)
	msg := encode(t, want)
	if msg[0] != FormatBatchExtras {
		t.Fatalf("a batch with extras starts with %#x, want %#x", msg[0], FormatBatchExtras)
	}
	got, err := Decode(msg, nil)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// The same events without their extras are format 2 again: the
	// format follows the message, not the batch's history.
	var b Batch
	for i := range want {
		if err := b.Add(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	b.Reset()
	plain := run()
	for i := range plain {
		if err := b.Add(&plain[i]); err != nil {
			t.Fatal(err)
		}
	}
	if hex.EncodeToString(b.Bytes()) != format2Run {
		t.Error("a batch reset after extras does not write format 2")
	}
	// Sizes: EncodedSize is what Add adds, extras included.
	var sb Batch
	for i := range want {
		before := sb.Size()
		if err := sb.Add(&want[i]); err != nil {
			t.Fatal(err)
		}
		added := sb.Size() - before
		if i == 0 {
			added -= batchHeader + uvarintLen(want[0].Prev)
		}
		if got := EncodedSize(&want[i]); got != added {
			t.Errorf("EncodedSize(event %d) = %d, Add added %d", i, got, added)
		}
	}
}

// TestExtrasRefused: a format 2 reader cannot take a flagged status (so an
// edge of the release before extras refuses such a message rather than
// serving its links without them), and malformed extras are refused
// whole.
func TestExtrasRefused(t *testing.T) {
	msg := encode(t, runExtras(t))
	as2 := bytes.Clone(msg)
	as2[0] = FormatBatch
	if got, err := Decode(as2, nil); err == nil {
		t.Errorf("a message with extras read as format 2: %d events", len(got))
	}
	one := func(x string) []byte {
		e := Event{Version: 5, Prev: 4, Kind: KindLink, Code: "00000A", URL: "https://x/", RedirectType: 302, Status: link.Active}
		b := []byte{FormatBatchExtras, 1, 0, 0, 0, 4, 1, kindLink, statusActive | statusExtras}
		b = appendEvent(b[:6], &e, 1)
		b[8] |= statusExtras
		return appendString(b, x)
	}
	if _, err := Decode(one(extras(t, link.Extras{MaxClicks: 3})), nil); err != nil {
		t.Fatalf("the hand-built event itself is refused: %v", err)
	}
	for name, m := range map[string][]byte{
		"empty extras":        one(""),
		"lone flags byte":     one("\x00"),
		"unknown flag":        one("\x10"),
		"javascript rule":     one("\x04\x01\x01\x02\x0bjavascript:"),
		"extras cut short":    one(extras(t, link.Extras{PasswordHash: testHash}))[:40],
		"extras length huge":  append(one("")[:len(one(""))-1], 0xff, 0xff, 0xff, 0x7f),
		"extras on a segment": append([]byte{FormatBatchExtras, 1, 0, 0, 0, 0, 1, kindSegment, segOpened | statusExtras}, 1, 'd', 1, 1),
	} {
		if got, err := Decode(m, nil); err == nil {
			t.Errorf("%s: Decode(% x) = %+v; want an error", name, m, got)
		}
	}
	var b Batch
	for name, e := range map[string]Event{
		"malformed": {Version: 1, Kind: KindLink, Code: "00000A", URL: "https://x/", RedirectType: 302, Status: link.Active, Extras: "\x00"},
		"segment":   {Version: 1, Kind: KindSegment, Namespace: "default", SegStart: 1, SegEnd: 2, SegState: SegmentOpened, Extras: extras(t, link.Extras{MaxClicks: 1})},
	} {
		if err := b.Add(&e); !errors.Is(err, errInvalid) {
			t.Errorf("Add %s = %v; want an invalid-event error", name, err)
		}
	}
	e := runExtras(t)[0]
	if _, err := Marshal(&e); err == nil || !strings.Contains(err.Error(), "extras") {
		t.Errorf("Marshal of an event with extras = %v; want a refusal (the JSON shape predates extras)", err)
	}
}
