package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("100_000_000, 1000000,10000000")
	if err != nil || len(got) != 3 || got[0] != 1_000_000 || got[2] != 100_000_000 {
		t.Fatalf("parseSizes = %v, %v; want the three sizes in order", got, err)
	}
	for _, bad := range []string{"", "1M", "10", "1000000,1000000", "1000000,,2000000"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

// TestIdealHitRatio checks the sum against P(rank < budget) of Zipf
// weights 1/(k+1)^s written out, and its edges.
func TestIdealHitRatio(t *testing.T) {
	const n, s = 1000, 1.1
	var head, all float64
	for k := range n {
		w := 1 / math.Pow(float64(k+1), s)
		all += w
		if k < 100 {
			head += w
		}
	}
	if got, want := idealHitRatio(n, 100, s), head/all; math.Abs(got-want) > 1e-12 {
		t.Errorf("idealHitRatio(1000, 100) = %v, want %v", got, want)
	}
	if got := idealHitRatio(n, n, s); got != 1 {
		t.Errorf("a budget of every link: %v, want 1", got)
	}
	if a, b := idealHitRatio(1_000_000, 100_000, s), idealHitRatio(10_000_000, 1_000_000, s); !(a < b && b < 1) {
		t.Errorf("10%% budgets: %v at 1M, %v at 10M; want the larger set's head to hold more", a, b)
	}
}

func TestReadBudget(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		f := filepath.Join(dir, "b.json")
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	got, err := readBudget(write(`[{"links": 100000000, "budget": 10000000, "hit_ratio": 0.95, "projected": true}]`))
	if err != nil || len(got) != 1 || got[0].HitRatio != 0.95 || !got[0].Projected {
		t.Fatalf("readBudget = %+v, %v", got, err)
	}
	for _, bad := range []string{`{"links": 1}`, `[{"links": 10, "budget": 20, "hit_ratio": 0.5}]`, `[{"links": 10, "budget": 5, "hit_ratio": 1.5}]`, `[`} {
		if _, err := readBudget(write(bad)); err == nil {
			t.Errorf("readBudget(%s) accepted", bad)
		}
	}
	if got, err := readBudget(""); got != nil || err != nil {
		t.Errorf("no file: %v, %v; want none", got, err)
	}
}

// TestWriteScale: a run renders to a table with a column per size and the
// smallest again, a chart and its JSON; rendering that JSON again with
// bench/budget's figure merges it into its size's columns only, and a
// later merge replaces it.
func TestWriteScale(t *testing.T) {
	row := func(n int, zipfNS float64) scaleRow {
		return scaleRow{Links: n, BuildSecs: 3, FileBytes: int64(n) * 72, Load: "1.00 1.00 1.00", IdealRatio: idealHitRatio(n, n/10, 1.1),
			Snapshot: map[string]float64{"ready_ms": 20, "rss_per_link": 74, "ready_rss_per_link": 3, "verify_ms": 100, "huge_share": 0.9,
				"lookup_ns": 300, "zipf_ns": zipfNS, "uniform_ns": 1000, "major_faults": 0}}
	}
	run := scaleRun{Sizes: []int{1000, 10_000}, Commit: "abc", At: "2026-12-01 19:00 UTC", TookSecs: 5, BudgetShare: 0.1,
		Rows: []scaleRow{row(1000, 500), row(10_000, 625)}, Again: row(1000, 500)}
	stem := filepath.Join(t.TempDir(), "out", "2026-12-01-abc-scale")
	if err := writeScale(stem, run, nil); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(stem + ".md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1k again |", "0.80×", "(lead merges)", "< 2 s at 10M"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	if st, err := os.Stat(stem + ".png"); err != nil || st.Size() == 0 {
		t.Fatalf("chart: %v", err)
	}
	budget := filepath.Join(t.TempDir(), "budget.json")
	if err := os.WriteFile(budget, []byte(`[{"links": 10000, "budget": 1000, "hit_ratio": 0.875}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runScale(scaleConfig{from: stem + ".json", budgetFile: budget}); err != nil {
		t.Fatal(err)
	}
	md, _ = os.ReadFile(stem + ".md")
	var line string
	for l := range strings.Lines(string(md)) {
		if strings.HasPrefix(l, "| budgeted hit ratio, bench/budget") {
			line = l
		}
	}
	if cells := strings.Split(line, "|"); len(cells) != 7 || !strings.Contains(cells[4], "0.875 (budget 1k)") ||
		!strings.Contains(cells[3], "not measured") || !strings.Contains(cells[5], "not measured") {
		t.Errorf("after merging bench/budget's figure for 10000 links, the row is %q", line)
	}
	if err := os.WriteFile(budget, []byte(`[{"links": 1000, "budget": 100, "hit_ratio": 0.75}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runScale(scaleConfig{from: stem + ".json", budgetFile: budget}); err != nil {
		t.Fatal(err)
	}
	md, _ = os.ReadFile(stem + ".md")
	if n := strings.Count(string(md), "0.750 (budget 100)"); n != 2 {
		t.Errorf("the smallest size's figure shows %d times, want in its column and in its again column:\n%s", n, md)
	}
	var again scaleRun
	b, _ := os.ReadFile(stem + ".json")
	if err := json.Unmarshal(b, &again); err != nil || again.Rows[0].Budget == nil || again.Again.Budget == nil || again.Rows[1].Budget != nil || !again.BudgetMerged {
		t.Fatalf("JSON after the merge: %v, %+v", err, again.Rows)
	}
}
