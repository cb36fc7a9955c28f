package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/bench/report"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// scaleConfig is what -scale measures and where it writes.
type scaleConfig struct {
	sizes       []int
	dir         string // keeps the files when set
	out         string // folder of the results file and chart
	busy, warm  bool
	reuse       bool
	budgetShare float64 // the budget as a share of the links, for the model column
	budgetFile  string  // bench/budget's figures, when given
	from        string  // an earlier run's JSON to render again instead of measuring
	commit      string  // names the results; default: git's HEAD
	profile     string  // CPU profiles' prefix, "" for none
}

// parseSizes reads "1000000,10000000,100000000" (underscores allowed).
func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || n < 1000 {
			return nil, fmt.Errorf("-scale: %q is not a number of links of at least 1000", f)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	if len(slices.Compact(slices.Clone(sizes))) != len(sizes) {
		return nil, fmt.Errorf("-scale: %q names a size twice", s)
	}
	return sizes, nil
}

// scaleRow is one size's figures.
type scaleRow struct {
	Links      int                `json:"links"`
	BuildSecs  float64            `json:"build_seconds"`
	Reused     bool               `json:"reused,omitempty"`
	FileBytes  int64              `json:"file_bytes"`
	Load       string             `json:"load_average"`
	Snapshot   map[string]float64 `json:"snapshot"`
	IdealRatio float64            `json:"ideal_budget_hit_ratio"`
	Budget     *budgetFigure      `json:"budget,omitempty"`
}

// budgetFigure is one of bench/budget's results: the edge's hit ratio
// with a snapshot holding budget of links links.
type budgetFigure struct {
	Links    int     `json:"links"`
	Budget   int     `json:"budget"`
	HitRatio float64 `json:"hit_ratio"`
	// Projected is true when the figure was not measured at this size but
	// derived from one that was (bench/budget says how).
	Projected bool `json:"projected,omitempty"`
}

// runScale measures each size in turn, in fresh children as run does but
// without the Go map, then measures the smallest again (a second baseline:
// the machine's load drifts over a run of many minutes), and writes
// out/<date>-<commit>-scale.md with a PNG chart beside it.
func runScale(cfg scaleConfig) error {
	budget, err := readBudget(cfg.budgetFile)
	if err != nil {
		return err
	}
	if cfg.from != "" {
		return rerender(cfg, budget)
	}
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "edgelink-snapscale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	started := time.Now()
	var rows []scaleRow
	for _, n := range cfg.sizes {
		var res results
		snapFile, _, err := generate(n, dir, false, cfg.warm, cfg.reuse, &res)
		if err != nil {
			return err
		}
		row := scaleRow{Links: n, BuildSecs: res.BuildSecs, Reused: res.Reused, FileBytes: res.FileBytes, Load: loadAverage()}
		if row.Snapshot, err = measureBusy(cfg.busy, snapFile, n, cfg.profilePrefix(n)); err != nil {
			return err
		}
		row.IdealRatio = idealHitRatio(n, int(math.Round(cfg.budgetShare*float64(n))), 1.1)
		fmt.Printf("%d links: ready %.0f ms, %.1f B/link, %.0f hits per CPU-second (Zipf 1.1), load %s\n",
			n, row.Snapshot["ready_ms"], row.Snapshot["rss_per_link"], 1e9/row.Snapshot["zipf_ns"], row.Load)
		rows = append(rows, row)
		if cfg.dir == "" && n != cfg.sizes[0] {
			_ = os.Remove(snapFile) // 7 GB at 100M: not kept past its size
		}
	}
	// The smallest once more, last, against the drift of a long run.
	again := rows[0]
	again.Load = loadAverage()
	if again.Snapshot, err = measureBusy(cfg.busy, filepath.Join(dir, snapshot.ObjectName(uint64(cfg.sizes[0]))), cfg.sizes[0], cfg.profilePrefix(0)); err != nil {
		return err
	}
	run := scaleRun{Sizes: cfg.sizes, Busy: cfg.busy, Warm: cfg.warm, BudgetShare: cfg.budgetShare, Rows: rows, Again: again,
		TookSecs: time.Since(started).Seconds(), At: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Commit: cfg.commit}
	if run.Commit == "" {
		run.Commit = gitCommit()
	}
	stem := filepath.Join(cfg.out, run.At[:len("2006-01-02")]+"-"+run.Commit+"-scale")
	return writeScale(stem, run, budget)
}

// scaleRun is one -scale run: what writeScale renders, kept beside the
// results as JSON so that they can be rendered again with bench/budget's
// figures merged (-from).
type scaleRun struct {
	Sizes       []int      `json:"sizes"`
	Commit      string     `json:"commit"`
	At          string     `json:"at"`
	TookSecs    float64    `json:"took_seconds"`
	Busy        bool       `json:"busy"`
	Warm        bool       `json:"warm"`
	BudgetShare float64    `json:"budget_share"`
	Rows        []scaleRow `json:"rows"`
	Again       scaleRow   `json:"smallest_again"`
	// BudgetMerged: bench/budget's figures were given; a size without
	// one was not measured there.
	BudgetMerged bool `json:"budget_merged,omitempty"`
}

// writeScale merges budget's figures into run (replacing any merged
// before; none given keeps them) and writes stem.md, stem.png and
// stem.json.
func writeScale(stem string, run scaleRun, budget []budgetFigure) error {
	if len(budget) > 0 {
		run.BudgetMerged = true
	}
	rows := []*scaleRow{&run.Again}
	for i := range run.Rows {
		rows = append(rows, &run.Rows[i])
	}
	for _, r := range rows {
		if len(budget) > 0 {
			r.Budget = nil // a merge replaces the figures of an earlier one
		}
		for j := range budget {
			if budget[j].Links == r.Links {
				r.Budget = &budget[j]
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(stem), 0o755); err != nil {
		return err
	}
	md := scaleMarkdown(run)
	if err := os.WriteFile(stem+".md", []byte(md), 0o644); err != nil {
		return err
	}
	if err := scaleChart(stem+".png", run); err != nil {
		return err
	}
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(stem+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("\n%s\nwrote %s.md, .png and .json\n", md, stem)
	return nil
}

// rerender renders the run in cfg.from again, with budget merged, beside it.
func rerender(cfg scaleConfig, budget []budgetFigure) error {
	b, err := os.ReadFile(cfg.from)
	if err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	var run scaleRun
	if err := json.Unmarshal(b, &run); err != nil {
		return fmt.Errorf("-from %s: %w", cfg.from, err)
	}
	if len(run.Rows) == 0 {
		return fmt.Errorf("-from %s: no sizes in it", cfg.from)
	}
	return writeScale(strings.TrimSuffix(cfg.from, ".json"), run, budget)
}

// readBudget reads bench/budget's figures: a JSON array of
// {links, budget, hit_ratio, projected}; none without a file.
func readBudget(file string) ([]budgetFigure, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-budget: %w", err)
	}
	var budget []budgetFigure
	if err := json.Unmarshal(b, &budget); err != nil {
		return nil, fmt.Errorf("-budget %s: want a JSON array of {links, budget, hit_ratio, projected}: %w", file, err)
	}
	for _, f := range budget {
		if f.Links <= 0 || f.Budget <= 0 || f.Budget > f.Links || f.HitRatio < 0 || f.HitRatio > 1 {
			return nil, fmt.Errorf("-budget %s: %+v: want 0 < budget ≤ links and a hit ratio in [0, 1]", file, f)
		}
	}
	return budget, nil
}

// profilePrefix names size n's profiles (0: the smallest, measured again).
func (c scaleConfig) profilePrefix(n int) string {
	if c.profile == "" {
		return ""
	}
	if n == 0 {
		return c.profile + "-" + millions(c.sizes[0]) + "-again"
	}
	return c.profile + "-" + millions(n)
}

// measureBusy measures the snapshot side on file, with a core spinning
// meanwhile when busy (and not while the next file is built).
func measureBusy(busy bool, file string, n int, profile string) (map[string]float64, error) {
	if busy {
		hog, err := startHog()
		if err != nil {
			return nil, err
		}
		defer func() { _ = hog.Process.Kill(); _ = hog.Wait() }()
	}
	return measureChild("snapshot", file, n, profile)
}

// idealHitRatio is the share of Zipf(s) requests over n links that fall on
// the budget hottest ones, P(rank < budget): the hit ratio of an edge whose
// snapshot holds exactly the links the requests favour (what a hotness by
// recent clicks approaches on a steady mix). bench/budget measures what a
// real one gets.
func idealHitRatio(n, budget int, s float64) float64 {
	if budget >= n {
		return 1
	}
	var head, all float64
	// Summed from the smallest terms up, so 10⁸ of them lose no precision.
	for k := n; k >= 1; k-- {
		t := math.Pow(float64(k), -s)
		all += t
		if k <= budget {
			head += t
		}
	}
	return head / all
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", "bench/snapshot", "shared/snapshot", "edge").Output(); err == nil && len(st) > 0 {
		c += "-dirty"
	}
	return c
}

func millions(n int) string {
	if n%1_000_000 == 0 {
		return strconv.Itoa(n/1_000_000) + "M"
	}
	if n%1000 == 0 && n < 1_000_000 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func scaleMarkdown(run scaleRun) string {
	rows, again := run.Rows, run.Again
	var b strings.Builder
	fmt.Fprintf(&b, "# Snapshot layer by size: %s\n\n", strings.Join(mapSlice(run.Sizes, millions), " → "))
	fmt.Fprintf(&b, "`go run ./bench/snapshot -scale %s` at %s, %s; the run took %s on a 2-core machine",
		strings.Join(mapSlice(run.Sizes, strconv.Itoa), ","), run.Commit, run.At, (time.Duration(run.TookSecs) * time.Second).Round(time.Second))
	if run.Busy {
		b.WriteString(", one core spinning (-busy)")
	}
	if run.Warm {
		b.WriteString(", files left in the page cache (-warm)")
	} else {
		b.WriteString(", each file read from the disk as an edge reads a download")
	}
	fmt.Fprintf(&b, "; the smallest size is measured again at the end, against the drift of a long run.\n\n")

	base := func(key string) float64 { return (rows[0].Snapshot[key] + again.Snapshot[key]) / 2 }
	all := append(slices.Clone(rows), again)
	header := []string{"", "aim"}
	for _, r := range rows {
		header = append(header, millions(r.Links))
	}
	header = append(header, millions(again.Links)+" again")
	t := report.Table{Header: header, Align: "ll" + strings.Repeat("r", len(all))}
	line := func(name, aim string, cell func(r scaleRow) string) {
		t.Add(append([]string{name, aim}, mapSlice(all, cell)...)...)
	}
	fig := func(format, key string, scale float64) func(r scaleRow) string {
		return func(r scaleRow) string { return fmt.Sprintf(format, r.Snapshot[key]*scale) }
	}
	line("file", "", func(r scaleRow) string {
		return fmt.Sprintf("%.2f GiB, %.1f B/link", float64(r.FileBytes)/(1<<30), float64(r.FileBytes)/float64(r.Links))
	})
	line("build (writer, one core)", "", func(r scaleRow) string {
		if r.Reused && r.BuildSecs > 0 {
			return fmt.Sprintf("reused (built in %.0f s)", r.BuildSecs)
		} else if r.Reused {
			return "reused"
		}
		return fmt.Sprintf("%.1f s", r.BuildSecs)
	})
	line("**process start to ready**", "< 2 s at 10M, < 10 s at 100M", fig("%.0f ms", "ready_ms", 1))
	line("RSS per link at ready", "", fig("%.1f B", "ready_rss_per_link", 1))
	line("**RSS per link, every page touched**", "≤ 90 B", fig("%.1f B", "rss_per_link", 1))
	line("background verification", "", fig("%.1f s", "verify_ms", 1e-3))
	line("share of the file in huge pages", "", fig("%.0f%%", "huge_share", 100))
	line("lookup, uniform (CPU)", "", fig("%.0f ns", "lookup_ns", 1))
	line("handler CPU per hit, Zipf(1.1)", "", fig("%.0f ns", "zipf_ns", 1))
	line("**hits per handler CPU-second, Zipf(1.1)**", "", func(r scaleRow) string { return fmt.Sprintf("%.2f M", 1e3/r.Snapshot["zipf_ns"]) })
	line("**× the smallest**", "≥ 0.8× at 100M (server)", func(r scaleRow) string { return fmt.Sprintf("%.2f×", base("zipf_ns")/r.Snapshot["zipf_ns"]) })
	line("hits per handler CPU-second, uniform", "", func(r scaleRow) string { return fmt.Sprintf("%.2f M", 1e3/r.Snapshot["uniform_ns"]) })
	line("× the smallest", "", func(r scaleRow) string { return fmt.Sprintf("%.2f×", base("uniform_ns")/r.Snapshot["uniform_ns"]) })
	line(fmt.Sprintf("**budgeted hit ratio**, ideal (budget %.0f%%)", 100*run.BudgetShare), "", func(r scaleRow) string { return fmt.Sprintf("%.3f", r.IdealRatio) })
	line("budgeted hit ratio, bench/budget", "", func(r scaleRow) string {
		switch {
		case r.Budget == nil && run.BudgetMerged:
			return "not measured"
		case r.Budget == nil:
			return "(lead merges)"
		}
		s := fmt.Sprintf("%.3f (budget %s)", r.Budget.HitRatio, millions(r.Budget.Budget))
		if r.Budget.Projected {
			s += ", projected"
		}
		return s
	})
	line("major page faults while measuring", "", fig("%.0f", "major_faults", 1))
	line("load average (1, 5, 15 min)", "", func(r scaleRow) string { return r.Load })
	b.WriteString(t.Markdown())
	b.WriteString(`
- **start to ready**: from exec of a fresh process to its ready line: the
  file mapped, its header, section table and small sections checked, the
  bloom decoded, in service (store.LoadFile, Layers.Install). Aims: < 2 s at
  10M, < 10 s at 100M, also on a busy machine.
- **RSS/link**: resident-set growth over the process's own start, at ready
  and once the background verification has read every page (the mapped
  file's pages count). Aim: ≤ 90 B/link at 100M.
- **hits/CPU-s**: redirects answered per CPU-second of the measuring thread
  by the edge's fasthttp handler over the layers (redirect.Handler, no
  network), on a Zipf(1.1) sample of a million requests and on a uniform
  one; the least disturbed of five rounds. "× smallest" divides by the mean
  of the smallest size's two runs (first and last). The whole server spends
  far more per request (the network, the kernel: about 17 µs under wrk, see
  docs/benchmarks.md), so the server's ratio is closer to 1 than the
  handler's. Aim: the server's hits per CPU-second at 100M ≥ 0.8× the 1M
  figure.
- **budget hit ratio, ideal**: the share of Zipf(1.1) requests that fall on
  the hottest links a budget of that share holds, P(rank < budget), computed
  exactly: what a snapshot of the hottest links by recent clicks approaches
  on a steady mix. The measured column is bench/budget's (a real edge, real
  hotness, the long-tail cache, the authority), merged from its JSON
  (-budget FILE); "(lead merges)" where none was given, "not measured" for
  a size it has no figure of, "projected" for one it derived from a
  smaller measured size.
- **major faults**: pages read back from the disk while measuring: the
  kernel reclaimed part of the mapping (memory pressure); each costs
  milliseconds and shows in the handler figures.

Figures from one run on a shared machine: ratios within the run mean more
than absolute times; CPU-time figures vary by about ±30% between runs.
`)
	return b.String()
}

func mapSlice[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func scaleChart(file string, run scaleRun) error {
	rows, again, share := run.Rows, run.Again, run.BudgetShare
	xs := make([]float64, len(rows))
	names := make([]string, len(rows))
	col := func(f func(r scaleRow) float64) []float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		return v
	}
	for i, r := range rows {
		xs[i], names[i] = float64(r.Links), millions(r.Links)
	}
	smallest := func(key string) float64 { return (rows[0].Snapshot[key] + again.Snapshot[key]) / 2 }
	measured := col(func(r scaleRow) float64 {
		if r.Budget == nil {
			return math.NaN()
		}
		return r.Budget.HitRatio
	})
	budgetSeries := []report.Series{{Name: "ideal (hottest by rank)", Values: col(func(r scaleRow) float64 { return r.IdealRatio })}}
	if !slices.ContainsFunc(measured, func(v float64) bool { return !math.IsNaN(v) }) {
		budgetSeries[0].Name = "ideal; bench/budget not merged"
	} else {
		name := "bench/budget"
		var projected []string
		for _, r := range rows {
			if r.Budget != nil && r.Budget.Projected {
				projected = append(projected, millions(r.Links))
			}
		}
		if len(projected) > 0 {
			name += " (projected at " + strings.Join(projected, ", ") + ")"
		}
		budgetSeries = append(budgetSeries, report.Series{Name: name, Values: measured})
	}
	return report.PanelChart(file, "Snapshot layer by number of links (one run, shared 2-core machine)", xs, names, []report.Panel{
		{Title: "process start to ready", YLabel: "ms", Zero: true,
			Series: []report.Series{{Values: col(func(r scaleRow) float64 { return r.Snapshot["ready_ms"] })}}},
		{Title: "RSS per link, all pages touched", YLabel: "bytes", Zero: true, Floor: 90,
			Series: []report.Series{{Values: col(func(r scaleRow) float64 { return r.Snapshot["rss_per_link"] })}}},
		{Title: "hits per handler CPU-second, × smallest", YLabel: "ratio", Zero: true, Floor: 0.8, Series: []report.Series{
			{Name: "Zipf(1.1)", Values: col(func(r scaleRow) float64 { return smallest("zipf_ns") / r.Snapshot["zipf_ns"] })},
			{Name: "uniform", Values: col(func(r scaleRow) float64 { return smallest("uniform_ns") / r.Snapshot["uniform_ns"] })},
		}},
		{Title: fmt.Sprintf("budgeted hit ratio (budget %.0f%% of links)", 100*share), YLabel: "share of requests", Zero: true, Series: budgetSeries},
	})
}
