package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/bench/measure"
)

// usage is CPU seconds spent by each side of a phase.
type usage struct{ control, pg, loader float64 }

func (u usage) sub(v usage) usage {
	return usage{control: u.control - v.control, pg: u.pg - v.pg, loader: u.loader - v.loader}
}

// perLink is u in microseconds per link created.
func (u usage) perLink(n int) usage {
	if n == 0 {
		return usage{}
	}
	f := 1e6 / float64(n)
	return usage{control: u.control * f, pg: u.pg * f, loader: u.loader * f}
}

// meter reads the CPU of control's process, of every process of the
// PostgreSQL server (postmaster, backends, WAL writer, checkpointer) and of
// this process, which runs the load: vegeta or the raw pgx loop.
type meter struct {
	postmaster int
	control    int
}

// newMeter finds the postmaster as the parent of one of pool's backends.
func newMeter(ctx context.Context, pool *pgxpool.Pool) (*meter, error) {
	var backend int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return nil, err
	}
	st, err := measure.ReadStat(backend)
	if err != nil {
		return nil, fmt.Errorf("find the postmaster: %w", err)
	}
	return &meter{postmaster: st.PPID}, nil
}

// read sums the live processes' CPU. Backends that exit take their CPU
// with them: the pools here keep theirs for the whole run.
func (m *meter) read() usage {
	var u usage
	u.pg, _ = measure.Usage(measure.Tree(m.postmaster))
	if m.control != 0 {
		u.control, _ = measure.Usage([]int{m.control})
	}
	u.loader, _ = measure.Usage([]int{os.Getpid()})
	return u
}

// profile writes a CPU profile of control covering the next d (rounded up
// to whole seconds, as net/http/pprof takes them) to file.
func (c *control) profile(file string, d time.Duration) error {
	secs := int(math.Ceil(d.Seconds()))
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.base, secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stats reads the coalescer's counters: shared transactions and the
// creates they carried.
func (c *control) stats() ([2]uint64, error) {
	var v [2]uint64
	resp, err := http.Get(c.base + "/bench/stats")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	_, err = fmt.Fscan(resp.Body, &v[0], &v[1])
	return v, err
}
