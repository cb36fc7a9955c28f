package clicks

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBatchRoundTrip(t *testing.T) {
	want := []Click{{Code: "00000A", At: 1}, {Code: "custom-code_1", At: 1893456000000}, {Code: "zzzzzz", At: -5}}
	b := AppendHeader(nil, len(want))
	for _, c := range want {
		b = AppendClick(b, []byte(c.Code), c.At)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range [][]byte{nil, {format}, b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) succeeded", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	b := AppendHeader(nil, 1)
	f.Add(AppendClick(b, []byte("00000A"), 42))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := Decode(b)
		if err != nil {
			return
		}
		out := AppendHeader(nil, len(cs))
		for _, c := range cs {
			out = AppendClick(out, []byte(c.Code), c.At)
		}
		again, err := Decode(out)
		if err != nil || !cmp.Equal(again, cs) {
			t.Fatalf("re-decoding %q gave %v, %v; want %v", out, again, err, cs)
		}
	})
}
