package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
)

// serveFlag makes the binary the control side of the benchmark: control's
// API on loopback against the database at its value.
// The parent starts it as a process of its own so that the kernel's
// accounting of that process is control's CPU and nothing else (vegeta and
// the raw loops run in the parent).
const serveFlag = "serve-dsn"

// serveOptions are the child's settings, passed as flags by startControl.
type serveOptions struct {
	dsn      string
	writers  int
	coalesce int
	idStart  uint64
	conns    int
}

// serve runs control's API until ctx ends (SIGTERM from the parent's
// measure.Group; the parent's death kills it too) and prints
// "listening <addr>" once it accepts connections. /debug/pprof/ on the same
// listener serves the process's profiles, /bench/stats the coalescer's
// counters.
func serve(ctx context.Context, o serveOptions, out io.Writer) error {
	pcfg, err := pgxpool.ParseConfig(o.dsn)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(o.conns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.New(pool)
	ids := &memIDs{}
	ids.next.Store(o.idStart)
	svc := links.New(store, ids, links.Config{Reserved: api.Routes, Writers: o.writers, MaxCoalesce: o.coalesce})
	// Metrics are kept as control serve keeps them: they cost per request.
	handler := api.New(store, svc, api.Config{PublicURL: "https://sho.rt", RatePerSecond: -1,
		Registerer: prometheus.NewRegistry(),
		Log:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	mux := http.NewServeMux()
	mux.Handle("/", handler)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/bench/stats", func(w http.ResponseWriter, r *http.Request) {
		st := svc.Stats()
		fmt.Fprintf(w, "%d %d\n", st.SharedTx, st.Coalesced)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "listening %s\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	_ = srv.Close()
	return nil
}

// control is the child process serving the API, as the parent sees it.
type control struct {
	proc *measure.Proc
	base string
}

// startControl starts this binary in serve mode in g and waits until it
// listens.
func startControl(g *measure.Group, o serveOptions) (*control, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{exe, "-" + serveFlag, o.dsn, "-writers", strconv.Itoa(o.writers),
		"-serve-coalesce", strconv.Itoa(o.coalesce), "-serve-id-start", strconv.FormatUint(o.idStart, 10),
		"-serve-conns", strconv.Itoa(o.conns)}
	pr, pw := io.Pipe()
	p, err := g.Start("control", argv, "", nil, pw, os.Stderr)
	if err != nil {
		return nil, err
	}
	c := &control{proc: p}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		c.base = "http://" + a
		return c, nil
	case <-p.Exited():
		return nil, fmt.Errorf("control exited before it listened: %w", errors.Join(p.Err(), errors.New("no address")))
	case <-time.After(time.Minute):
		p.Stop(5 * time.Second)
		return nil, errors.New("control did not listen within a minute")
	}
}
