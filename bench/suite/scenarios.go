package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/control/snapshots"
)

// propagate times single creates until the edge answers their first 302,
// and until the edge has applied them from the change stream (the first
// 302 can come earlier, through the edge's authority lookup).
func (e *env) propagate() error {
	r := rand.New(rand.NewPCG(e.o.seed, 99))
	for i := range e.o.propagation {
		if e.ctx.Err() != nil {
			return e.ctx.Err()
		}
		target := dataset.Target(r)
		t0 := time.Now()
		code, version, err := e.st.createOne(e.ctx, target)
		if err != nil {
			return err
		}
		created := time.Since(t0)
		var first time.Duration
		for {
			resp, err := noFollow.Get(e.st.edgeURL + "/" + code)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode == 302 {
				if got := resp.Header.Get("Location"); got != target {
					e.res.wrong = append(e.res.wrong, fmt.Sprintf("propagation %s: Location %q, want %q", code, got, target))
				}
				first = time.Since(t0)
				break
			}
			if time.Since(t0) > 30*time.Second {
				return fmt.Errorf("%s: no 302 within 30s (last %d)", code, resp.StatusCode)
			}
			time.Sleep(time.Millisecond)
		}
		var applied time.Duration
		for {
			m, err := edgeMetrics(e.ctx, e.st.edgeURL)
			if err != nil {
				return err
			}
			if m["edge_changefeed_applied_version"] >= float64(version) {
				applied = time.Since(t0)
				break
			}
			if time.Since(t0) > 30*time.Second {
				return fmt.Errorf("%s: not applied from the stream within 30s", code)
			}
			time.Sleep(time.Millisecond)
		}
		e.res.prop = append(e.res.prop, propRec{create: created, first: first, applied: applied})
		if i%50 == 49 {
			fmt.Printf("   %d creates timed\n", i+1)
		}
	}
	return nil
}

// coldStart builds a snapshot with control's builder, then starts, round by
// round: the snapshot served through shared/snapshot, the Go map from the
// links file, nginx from its map file, and a second edge binary that boots
// the only way it can today (replaying the change stream); each is timed
// from spawn to its first correct 302, and its memory taken then.
func (e *env) coldStart() error {
	nc, err := nats.Connect(e.st.natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	snapFile := filepath.Join(e.dir, "links.snap")
	f, err := os.Create(snapFile)
	if err != nil {
		return err
	}
	t := time.Now()
	if _, err := snapshots.New(e.st.pg.Store(), js, nil).Build(e.ctx, f, nil); err != nil {
		f.Close()
		return fmt.Errorf("build snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	data, err := os.ReadFile(snapFile)
	if err != nil {
		return err
	}
	e.res.snapBuild, e.res.snapBytes = time.Since(t), int64(len(data))
	// Publish it as control's schedule would, so a booting edge that can
	// load snapshots finds this one, at the current stream position.
	if _, err := snapshots.Publish(e.ctx, js, data, 1); err != nil {
		return fmt.Errorf("publish snapshot: %w", err)
	}
	out, _ := exec.Command(filepath.Join(e.dir, "edge"), "--help").CombinedOutput()
	e.res.edgeSnapBoot = strings.Contains(string(out), "--snapshot-dir")
	links := filepath.Join(e.dir, "links.tsv")
	probe := rand.New(rand.NewPCG(e.o.seed, 7))
	for round := 1; round <= e.o.rounds; round++ {
		kinds := []string{"net/http+map", "snapshot", "nginx", "edgelink-edge"}
		for i := range kinds {
			kind := kinds[(i+round)%len(kinds)]
			k := probe.IntN(len(e.codes))
			var s *server
			t0 := time.Now()
			switch kind {
			case "net/http+map":
				s, err = startSelf(e.procs, e.self, kindGoMap, links, "", e.log)
			case "snapshot":
				s, err = startSelf(e.procs, e.self, kindSnapshot, links, "", e.log, "-snapshot", snapFile)
			case "nginx":
				s, err = startNginx(e.procs, filepath.Join(e.dir, "cold"), e.codes, e.urls, e.log)
				t0 = time.Now() // the map file is written; time nginx alone
			case "edgelink-edge":
				s, err = e.startEdge()
			}
			if err != nil {
				return err
			}
			err = waitHTTP(e.ctx, s.url+"/"+e.codes[k], 302, 10*time.Minute)
			if err == nil && kind == "edgelink-edge" {
				// Ready means caught up with the stream: every link known.
				err = waitHTTP(e.ctx, s.url+"/-/readyz", 200, 10*time.Minute)
			}
			took := time.Since(t0)
			_, rss := measure.Usage(s.pids())
			s.proc.Stop(5 * time.Second)
			e.procs.Forget(s.proc)
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			e.res.cold = append(e.res.cold, coldRec{kind: kind, round: round, took: took, rss: rss})
			fmt.Printf("   cold     round %d %-15s %8s  RSS %6.0f MiB\n", round, kind, took.Round(time.Millisecond), float64(rss)/(1<<20))
		}
	}
	return nil
}

// startEdge starts another edge binary on the run's NATS.
func (e *env) startEdge() (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	name := "cold" + strconv.Itoa(port)
	p, err := e.procs.Start("edge-cold", edgeArgv(filepath.Join(e.dir, "edge"), addr, e.st.natsURL, name, filepath.Join(e.dir, "edge-"+name), e.st.codeKeys),
		"", nil, e.log, e.log)
	if err != nil {
		return nil, err
	}
	return &server{name: "edge-cold", url: "http://" + addr, pids: func() []int { return []int{p.PID()} }, proc: p}, nil
}

var reCreateRatio = regexp.MustCompile(`(?m)^\s+(API [^:]+):\s+([0-9.]+)x`)

// create runs bench/create (its owner's benchmark of control's create path
// beside a raw pgx insert loop) once per round and keeps its ratios.
func (e *env) create() error {
	argv := []string{filepath.Join(e.dir, "create"), "-duration", e.o.createDur.String()}
	e.record([]string{"go", "run", "./bench/create", "-duration", e.o.createDur.String()})
	for round := 1; round <= e.o.rounds; round++ {
		out, _, err := e.runLoad(argv)
		if err != nil {
			return err
		}
		e.res.createOut = append(e.res.createOut, string(out))
		got := map[string]float64{}
		for _, m := range reCreateRatio.FindAllStringSubmatch(string(out), -1) {
			v, _ := strconv.ParseFloat(m[2], 64)
			got[strings.Join(strings.Fields(m[1]), " ")] = v
		}
		if len(got) == 0 {
			return fmt.Errorf("bench/create printed no ratios:\n%s", trimLines(string(out), 30))
		}
		e.res.createRatios = append(e.res.createRatios, got)
		fmt.Printf("   create   round %d: %v\n", round, got)
	}
	return nil
}

// soakRun holds the mix sample at a fixed rate against the edge for
// o.soak, with a trickle of creates, and samples the edge's memory.
func (e *env) soakRun() error {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	// A trickle of creates (5/s) keeps the overlay and the stream moving.
	go func() {
		r := rand.New(rand.NewPCG(e.o.seed, 5))
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _, _ = e.st.createOne(ctx, dataset.Target(r))
			}
		}
	}()
	edge := e.servers[len(e.servers)-1]
	gm := e.servers[3]
	done := make(chan error, 1)
	go func() {
		// Alternate one-minute attacks: the edge, then the Go map, so both
		// see the same traffic over the soak.
		var errs error
		deadline := time.Now().Add(e.o.soak)
		for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
			d := min(time.Minute, time.Until(deadline))
			for _, s := range []*server{edge, gm} {
				_, _, err := e.paced(s, "soak", "unpinned", i, e.mixFile, e.o.soakRate, e.o.conns, d/2)
				if err != nil {
					errs = err
				}
			}
		}
		done <- errs
	}()
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	start := time.Now()
	sample := func() {
		for _, s := range []*server{edge, gm} {
			_, rss := measure.Usage(s.pids())
			e.res.soak = append(e.res.soak, soakRec{server: s.name, at: time.Since(start), rss: rss})
		}
	}
	sample()
	for {
		select {
		case err := <-done:
			sample()
			e.res.finished = time.Now()
			if err != nil {
				e.res.failures = append(e.res.failures, err.Error())
			}
			return e.writeSoakReport()
		case <-t.C:
			sample()
			last := e.res.soak[len(e.res.soak)-2:]
			fmt.Printf("   %6s  %s %.0f MiB, %s %.0f MiB\n", time.Since(start).Round(time.Second), last[0].server, float64(last[0].rss)/(1<<20), last[1].server, float64(last[1].rss)/(1<<20))
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
	}
}

func sortedDurations(xs []time.Duration) []time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
