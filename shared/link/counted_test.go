package link

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClicksCountedRoundTrip: a limited link's count travels with its
// limit in every combination of extras, and LimitReached says whether it
// has reached it; a count without a limit is not written.
func TestClicksCountedRoundTrip(t *testing.T) {
	for _, x := range []Extras{
		{MaxClicks: 10, ClicksCounted: 3},
		{MaxClicks: 10, ClicksCounted: 10},
		{MaxClicks: 10, ClicksCounted: 12},
		{MaxClicks: 1, ClicksCounted: MaxClicksLimit},
		{MaxClicks: 10},
		{MaxClicks: 1000, ClicksCounted: 999, PasswordHash: testHash},
		{MaxClicks: 1000, ClicksCounted: 1 << 40, Rules: sampleRules(), PasswordHash: testHash},
	} {
		b, err := AppendExtras(nil, &x)
		if err != nil {
			t.Fatalf("AppendExtras(%+v): %v", x, err)
		}
		if err := CheckExtras(b); err != nil {
			t.Fatalf("CheckExtras(AppendExtras(%+v)): %v", x, err)
		}
		got, err := DecodeExtras(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(x, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
		v := ViewExtras(b)
		if v.MaxClicks() != x.MaxClicks || v.ClicksCounted() != x.ClicksCounted {
			t.Errorf("view of %+v: max %d, counted %d", x, v.MaxClicks(), v.ClicksCounted())
		}
		if want := x.ClicksCounted >= x.MaxClicks; v.LimitReached() != want {
			t.Errorf("%+v: LimitReached %v, want %v", x, v.LimitReached(), want)
		}
		if string(v.PasswordHash()) != x.PasswordHash || v.HasRules() != (len(x.Rules) > 0) {
			t.Errorf("%+v: the count moved the fields after it", x)
		}
	}
	// Without a limit the count is dropped, and nothing is reached.
	b, err := ComposeCountedExtras(nil, nil, testHash, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := ComposeExtras(nil, nil, testHash, 0)
	if string(b) != string(plain) {
		t.Errorf("a count without a limit was written: %x, want %x", b, plain)
	}
	if v := ViewExtras(b); v.LimitReached() || v.ClicksCounted() != 0 {
		t.Errorf("no limit: reached %v, counted %d", v.LimitReached(), v.ClicksCounted())
	}
	if b, _ := ComposeCountedExtras(nil, nil, "", 0, 50); len(b) != 0 {
		t.Errorf("a lone count made extras %x", b)
	}
	// A limit with nothing counted is the limit alone, byte for byte.
	a, _ := ComposeCountedExtras(nil, nil, "", 7, 0)
	if string(a) != string([]byte{extraMaxClicks, 7}) {
		t.Errorf("limit 7, counted 0: %x", a)
	}
}

// TestClicksCountedRefused: the count's encoding has one form, within
// bounds, and only beside a limit.
func TestClicksCountedRefused(t *testing.T) {
	for name, b := range map[string][]byte{
		"count without a limit":  {extraCounted, 3},
		"count of zero":          {extraMaxClicks | extraCounted, 5, 0},
		"count past the end":     {extraMaxClicks | extraCounted, 5},
		"overlong count":         {extraMaxClicks | extraCounted, 5, 0x83, 0x00},
		"count over the limit":   {extraMaxClicks | extraCounted, 5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10},
		"flag 0x10 beside count": {extraMaxClicks | extraCounted | 0x10, 5, 1},
	} {
		if err := CheckExtras(b); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: CheckExtras(%x) = %v, want ErrInvalidInput", name, b, err)
		}
	}
	for _, c := range []int64{-1, MaxClicksLimit + 1} {
		if _, err := ComposeCountedExtras(nil, nil, "", 5, c); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("counted %d: %v, want ErrInvalidInput", c, err)
		}
	}
}

// TestLimitViewAllocatesNothing: the edge reads a limit and its count on
// every hit of a limited link.
func TestLimitViewAllocatesNothing(t *testing.T) {
	b, err := AppendExtras(nil, &Extras{MaxClicks: 100, ClicksCounted: 42, PasswordHash: testHash})
	if err != nil {
		t.Fatal(err)
	}
	var reached bool
	if n := testing.AllocsPerRun(100, func() {
		v := ViewExtras(b)
		reached = v.LimitReached() || v.ClicksCounted() > v.MaxClicks()
	}); n != 0 || reached {
		t.Errorf("%v allocations per view (reached %v)", n, reached)
	}
}
