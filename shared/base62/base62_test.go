package base62

import (
	"errors"
	"testing"
)

func TestEncodeKnownValues(t *testing.T) {
	tests := []struct {
		id   uint64
		code string
	}{
		{1, "000001"},
		{9, "000009"},
		{10, "00000A"},
		{35, "00000Z"},
		{36, "00000a"},
		{61, "00000z"},
		{62, "000010"},
		{62*62 - 1, "0000zz"},
		{MaxID, "zzzzzz"},
	}
	for _, tt := range tests {
		got, err := Encode(tt.id)
		if err != nil || got != tt.code {
			t.Errorf("Encode(%d) = %q, %v; want %q", tt.id, got, err, tt.code)
		}
		back, err := Decode(tt.code)
		if err != nil || back != tt.id {
			t.Errorf("Decode(%q) = %d, %v; want %d", tt.code, back, err, tt.id)
		}
		if !Valid(tt.code) {
			t.Errorf("Valid(%q) = false", tt.code)
		}
	}
}

func TestCaseIsSignificant(t *testing.T) {
	a, _ := Decode("00000A")
	b, _ := Decode("00000a")
	if a == b {
		t.Fatalf("00000A and 00000a decode to the same id %d", a)
	}
}

func TestEncodeOutOfRange(t *testing.T) {
	for _, id := range []uint64{0, MaxID + 1, ^uint64(0)} {
		if _, err := Encode(id); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Encode(%d) error = %v; want ErrOutOfRange", id, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		code string
		want error
	}{
		{"", ErrLength},
		{"00001", ErrLength},
		{"0000001", ErrLength},
		{"00000-", ErrAlphabet},
		{"00 001", ErrAlphabet},
		{"0000é", ErrAlphabet}, // 6 bytes, non-ASCII
		{"00000\x00", ErrAlphabet},
		{"000000", ErrSentinel},
	}
	for _, tt := range tests {
		if _, err := Decode(tt.code); !errors.Is(err, tt.want) {
			t.Errorf("Decode(%q) error = %v; want %v", tt.code, err, tt.want)
		}
		if Valid(tt.code) {
			t.Errorf("Valid(%q) = true; want false", tt.code)
		}
	}
}

func TestPutDoesNotAllocate(t *testing.T) {
	var buf [Length]byte
	allocs := testing.AllocsPerRun(100, func() { _ = Put(buf[:], 123456789) })
	if allocs != 0 {
		t.Fatalf("Put allocated %v times per run", allocs)
	}
	code := []byte("0Az9bc")
	allocs = testing.AllocsPerRun(100, func() { _ = Valid(code) })
	if allocs != 0 {
		t.Fatalf("Valid allocated %v times per run", allocs)
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"000001", "zzzzzz", "00000a", "000000", "ABC", "00000-", "\xff\xff\xff\xff\xff\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		id, err := Decode(code)
		if Valid(code) != (err == nil) {
			t.Fatalf("Valid(%q) = %v but Decode error = %v", code, Valid(code), err)
		}
		if err != nil {
			return
		}
		if id < MinID || id > MaxID {
			t.Fatalf("Decode(%q) = %d, outside the usable range", code, id)
		}
		back, err := Encode(id)
		if err != nil || back != code {
			t.Fatalf("Encode(Decode(%q)) = %q, %v", code, back, err)
		}
	})
}

func BenchmarkPut(b *testing.B) {
	b.ReportAllocs()
	var buf [Length]byte
	for i := 0; b.Loop(); i++ {
		_ = Put(buf[:], uint64(i)%MaxID+1)
	}
}
