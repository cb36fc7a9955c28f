package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/bench/report"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/store"
)

// serverConfig is what -server measures: whole fasthttp servers over the
// snapshot layer, one per size, loaded in turn.
type serverConfig struct {
	sizes    []int
	dir      string
	rounds   int
	duration time.Duration
	conns    int
}

// runServers starts one server child per size on its snapshot file in dir
// (built by an earlier -dir run, or built now), each verified before it is
// measured, then in each round loads every server in turn over loopback
// with the same Zipf(1.1) requests for duration, and reports redirects per
// CPU-second of the server process (utime+stime from /proc, all threads:
// the network, the kernel's share, the handler): the issue's "hits per
// server CPU-second". Each round's ratio to the smallest size is taken
// within the round, so both see the same machine.
func runServers(cfg serverConfig) error {
	type server struct {
		n    int
		cmd  *exec.Cmd
		in   io.WriteCloser
		addr string
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.in.Close() // the child serves until its stdin closes
			_ = s.cmd.Wait()
		}
	}()
	for _, n := range cfg.sizes {
		var res results
		// Reused as it is in the page cache: the children verify it.
		file, _, err := generate(n, cfg.dir, false, true, true, &res)
		if err != nil {
			return err
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.Command(exe, "-child", "serve", "-file", file, "-links", strconv.Itoa(n))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		s := &server{n: n, cmd: cmd, in: in}
		servers = append(servers, s)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening="); ok {
				s.addr = a
				break
			}
		}
		if s.addr == "" {
			return fmt.Errorf("server of %d links: no address (%v)", n, sc.Err())
		}
		go func() { _, _ = io.Copy(io.Discard, out) }()
		fmt.Printf("server of %d links at %s (verified)\n", n, s.addr)
	}
	perCPU := make([][]float64, len(servers)) // [server][round]
	for r := range cfg.rounds {
		for i, s := range servers {
			hits, cpu, err := loadServer(s.addr, s.cmd.Process.Pid, s.n, cfg, uint64(r))
			if err != nil {
				return fmt.Errorf("server of %d links: %w", s.n, err)
			}
			perCPU[i] = append(perCPU[i], float64(hits)/cpu)
			fmt.Printf("  round %d  %4s  %8d redirects  %.2f server CPU-s  %8.0f per server CPU-second\n", r, millions(s.n), hits, cpu, float64(hits)/cpu)
		}
	}
	t := report.Table{Header: []string{"links", "redirects per server CPU-second", "× " + millions(servers[0].n) + " (same round)"}, Align: "lrr"}
	for i, s := range servers {
		t.Add(millions(s.n), report.Summarize(perCPU[i]).Format("%.0f"), report.Summarize(report.Ratios(perCPU[i], perCPU[0])).Ratio())
	}
	fmt.Printf("\n%d rounds of %s per server, %d connections, Zipf(1.1), load average %s\n\n%s", cfg.rounds, cfg.duration, cfg.conns, loadAverage(), t.Markdown())
	return nil
}

// loadServer sends Zipf(1.1) requests to addr over conns keep-alive
// connections for cfg.duration and returns the redirects answered and the
// CPU seconds process pid spent meanwhile. Any other answer is an error.
func loadServer(addr string, pid, n int, cfg serverConfig, seed uint64) (hits int64, cpu float64, err error) {
	s := newSample(n, 1<<18, dataset.NewZipf(rand.New(rand.NewPCG(seed, 7)), 1.1, n))
	c := &fasthttp.HostClient{Addr: addr, MaxConns: cfg.conns, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	before, err := measure.ReadStat(pid)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	var (
		count atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.Header.SetHost("edge.bench")
			for i := w * 7919; ctx.Err() == nil; i++ {
				req.Header.SetRequestURIBytes(s.path(i))
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != fasthttp.StatusFound {
					if ctx.Err() != nil {
						return
					}
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s: %v (status %d)", s.path(i), err, resp.StatusCode())
					}
					mu.Unlock()
					cancel()
					return
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	after, err := measure.ReadStat(pid)
	if err != nil {
		return 0, 0, err
	}
	if first != nil {
		return 0, 0, first
	}
	return count.Load(), after.CPUSeconds() - before.CPUSeconds(), nil
}

// serveChild is the server side of -server: the edge's handler over the
// snapshot layer of file behind a fasthttp server on loopback, configured
// as the edge configures its own. It verifies the file first (the edge
// serves meanwhile; a measurement should not count it), prints its
// address, and serves until stdin closes.
func serveChild(file string) error {
	l, err := store.LoadFile(filepath.Base(file), file)
	if err != nil {
		return err
	}
	if err := l.Verify(context.Background()); err != nil {
		return err
	}
	a := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1000, 0.01), Segments: new(store.Segments), Snapshots: new(store.Snapshots)}
	a.Install(l)
	h := &redirect.Handler{Store: a}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &fasthttp.Server{Handler: h.Serve, Name: "edgelink", ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 60 * time.Second, ReadBufferSize: 8 << 10, NoDefaultServerHeader: true, NoDefaultContentType: true}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("listening=%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := srv.Shutdown(); err != nil {
		return err
	}
	if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
