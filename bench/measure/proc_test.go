package measure

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses, as the kernel prints it.
	line := "4242 (my (odd) server) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 123456 987654321 2048 " +
		"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, PPID: 1, PGRP: 4242, Comm: "my (odd) server", State: 'S', UTime: 250, STime: 75, NumThreads: 9, RSSPages: 2048}
	if got != want {
		t.Errorf("ParseStat:\n got %+v\nwant %+v", got, want)
	}
	if s := got.CPUSeconds(); s != 3.25 {
		t.Errorf("CPUSeconds = %v, want 3.25", s)
	}
	for _, bad := range []string{"", "12 no parens S 1", "12 (x) S 1 2 3"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) succeeded, want an error", bad)
		}
	}
}

func TestReadStatOfSelf(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.NumThreads < 1 || st.RSSPages <= 0 {
		t.Errorf("own stat looks wrong: %+v", st)
	}
}

func TestParseMachineCPU(t *testing.T) {
	b := []byte("cpu  100 20 30 400 50 6 4 10 0 0\ncpu0 50 10 15 200 25 3 2 5 0 0\n")
	got, err := ParseMachineCPU(b)
	if err != nil {
		t.Fatal(err)
	}
	// busy = user+nice+system+irq+softirq+steal = 170 ticks; total adds idle and iowait.
	if got.Busy != 1.70 || got.Total != 6.20 {
		t.Errorf("ParseMachineCPU = %+v, want Busy 1.70 Total 6.20", got)
	}
}

func TestQuote(t *testing.T) {
	if got, want := Quote([]string{"taskset", "-c", "1", "wrk", "-s", "a b.lua"}), `taskset -c 1 wrk -s "a b.lua"`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
}
