package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/edge/geo"
)

// The geo scenario (issue 22, countries): what looking up each click's
// country costs the edge. The statement measured: req per server
// CPU-second with the country data loaded at least 0.95× the figure
// without it.
//
// Two edge processes with the same flags, but for --geoip on one, serve
// the redirect scenario's sample behind a trusted proxy: every request
// carries an X-Forwarded-For with a public address drawn from the data
// itself (IPv4 and IPv6, as clients' addresses are, and a few with no
// country), so the edge with data looks real addresses up in real ranges
// rather than 127.0.0.1 every time. Both edges read the header (the same
// --trusted-proxies), so the only difference is the lookup.
const (
	geoTolerance = 0.05
	scenGeoOff   = "geo-off"
	scenGeoOn    = "geo-on"
	// geoSources is how many client addresses the requests come from.
	geoSources     = 4096
	metricGeoKnown = `edge_geo_lookups_total{outcome="known"}`
	metricGeoMiss  = `edge_geo_lookups_total{outcome="unknown"}`
)

// geoResult is what the scenario measured, for its section.
type geoResult struct {
	data            geo.Info
	v4, v6, nowhere int // the sources by kind
	checked         int
	off, on         string
}

// geoSourceAddrs draws n client addresses: 70% IPv4 and 28% IPv6 that the
// table places in a country (uniform over the address space the data
// covers, so weighted as the ranges are), and 2% with none (carrier-grade
// NAT, as misconfigured or internal clients send). The kind is drawn
// first, then addresses of that kind until one fits, so the shares hold
// whatever share of each space the data covers.
func geoSourceAddrs(t *geo.Table, seed uint64, n int) (out []netip.Addr, v4, v6, nowhere int) {
	r := rand.New(rand.NewPCG(seed, 0x6e0))
	for len(out) < n {
		var a netip.Addr
		switch k := r.IntN(100); {
		case k < 2:
			for {
				a = netip.AddrFrom4([4]byte{100, byte(64 + r.IntN(64)), byte(r.IntN(256)), byte(r.IntN(256))})
				if _, ok := t.Lookup(a); !ok {
					break
				}
			}
			nowhere++
		case k < 72:
			for {
				a = netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
				if _, ok := t.Lookup(a); ok {
					break
				}
			}
			v4++
		default:
			for {
				// Global unicast 2000::/4: a random /48, and a host in it.
				b := [16]byte{0x20 | byte(r.IntN(16)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}
				for i := 8; i < 16; i++ {
					b[i] = byte(r.IntN(256))
				}
				a = netip.AddrFrom16(b)
				if _, ok := t.Lookup(a); ok {
					break
				}
			}
			v6++
		}
		out = append(out, a)
	}
	return out, v4, v6, nowhere
}

// writeGeoRequests writes the sample as wrk replays it, one request a
// line: path, the client address for X-Forwarded-For, status, location;
// and the Lua script, file+".lua".
func writeGeoRequests(file string, reqs []dataset.Request, sources []netip.Addr) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i, q := range reqs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", q.Path, sources[i%len(sources)], q.Status, q.Location)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(file+".lua", []byte(`-- Replays the request sample, each request from its client address, as
-- a trusted proxy in front of the edge forwards it.
local paths = {}
local xff = {}
local i = 1
init = function(args)
  for line in io.lines("`+file+`") do
    local p, a = line:match("^([^\t]+)\t([^\t]+)")
    paths[#paths + 1] = p
    xff[#xff + 1] = a
  end
  i = math.random(#paths)
end
request = function()
  i = i + 1
  if i > #paths then i = 1 end
  return wrk.format(nil, paths[i], {["X-Forwarded-For"] = xff[i]})
end
`), 0o644)
}

// startGeoEdge starts an edge of the scenario's own, fed by the run's
// stack, with the run's trusted proxy (loopback) and geoip (none when
// empty); it serves once it has applied everything the main edge has.
func (e *env) startGeoEdge(name, geoip string, version uint64) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	argv := append(edgeArgv(filepath.Join(e.dir, "edge"), addr, e.st.natsURL, name, filepath.Join(e.dir, name), e.st.codeKeys),
		"--trusted-proxies", "127.0.0.1")
	if geoip != "" {
		argv = append(argv, "--geoip", geoip)
	}
	p, err := e.procs.Start(name, argv, "", nil, e.log, e.log)
	if err != nil {
		return nil, err
	}
	s := &server{name: name, url: "http://" + addr, pids: func() []int { return []int{p.PID()} }, proc: p}
	if err := waitHTTP(e.ctx, s.url+"/-/livez", 200, time.Minute); err != nil {
		p.Stop(5 * time.Second)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := waitApplied(e.ctx, s.url, version, 10*time.Minute); err != nil {
		p.Stop(5 * time.Second)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// checkGeoAnswers asks s the first n requests, each from its client
// address, and fails on a wrong status or Location.
func checkGeoAnswers(ctx context.Context, s *server, file string, n int) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	asked := 0
	for asked < n && sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 4)
		if len(f) != 4 {
			return asked, fmt.Errorf("%s: line %d: want 4 fields", file, asked+1)
		}
		path, xff, loc := f[0], f[1], f[3]
		status, err := strconv.Atoi(f[2])
		if err != nil {
			return asked, fmt.Errorf("%s: line %d: %w", file, asked+1, err)
		}
		req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
		if err != nil {
			return asked, err
		}
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := noFollow.Do(req)
		if err != nil {
			return asked, err
		}
		resp.Body.Close()
		asked++
		if resp.StatusCode != status || (status == http.StatusFound && resp.Header.Get("Location") != loc) {
			return asked, fmt.Errorf("%s %s from %s: got %d %q, want %d %q", s.name, path, xff, resp.StatusCode, resp.Header.Get("Location"), status, loc)
		}
	}
	return asked, sc.Err()
}

// geo runs the scenario with the Tor-format data in dataDir.
func (e *env) geo(dataDir string) error {
	table, err := geo.LoadTor(dataDir)
	if err != nil {
		return fmt.Errorf("%w (`go tool task geoip` fetches it; `go tool task bench` does)", err)
	}
	gr := &geoResult{data: table.Info()}
	sources, v4, v6, nowhere := geoSourceAddrs(table, e.o.seed, geoSources)
	gr.v4, gr.v6, gr.nowhere = v4, v6, nowhere
	mix, err := dataset.ReadRequestsFile(e.mixFile)
	if err != nil {
		return err
	}
	file := filepath.Join(e.dir, "geo.tsv")
	if err := writeGeoRequests(file, mix, sources); err != nil {
		return err
	}
	m, err := edgeMetrics(e.ctx, e.st.edgeURL)
	if err != nil {
		return err
	}
	version := uint64(m["edge_changefeed_applied_version"])
	off, err := e.startGeoEdge("edge-geo-off", "", version)
	if err != nil {
		return err
	}
	defer off.proc.Stop(5 * time.Second)
	on, err := e.startGeoEdge("edge-geo-on", dataDir, version)
	if err != nil {
		return err
	}
	defer on.proc.Stop(5 * time.Second)
	gr.off, gr.on = off.name, on.name
	fmt.Printf("   two edges up (pids %d without, %d with the country data: %d IPv4 and %d IPv6 ranges), %d client addresses (%d IPv4, %d IPv6, %d with no country)\n",
		off.proc.PID(), on.proc.PID(), gr.data.V4Ranges, gr.data.V6Ranges, len(sources), v4, v6, nowhere)
	for _, s := range []*server{off, on} {
		n, err := checkGeoAnswers(e.ctx, s, file, 3000)
		if err != nil {
			return fmt.Errorf("answers check: %w", err)
		}
		gr.checked = n
	}
	if err := e.geoPairs(off, on, file+".lua"); err != nil {
		return err
	}
	dir, stem := e.outName()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	body, err := e.geoSection(gr, dir, stem)
	if err != nil {
		return err
	}
	e.res.sections = append(e.res.sections, section{title: "Countries: the edge's cost of a country per click", body: body})
	return nil
}

// geoPairs runs the sample on both edges in back-to-back pinned pairs, the
// order alternating pair by pair (as domainPairs does).
func (e *env) geoPairs(off, on *server, lua string) error {
	for _, s := range []*server{off, on} {
		if _, err := e.wrk(s, "warmup", "unpinned", 0, lua, time.Second); err != nil {
			return err
		}
	}
	// Pinned as the redirect scenario's servers are: both edges on the
	// servers' CPUs, the stack and wrk on the load generator's.
	if err := e.pin("pinned"); err != nil {
		return err
	}
	defer e.pin("")
	edges := []int{off.proc.PID(), on.proc.PID()}
	if err := measure.SetAffinity(edges, e.o.serverCPU); err != nil {
		return err
	}
	defer measure.SetAffinity(edges, "")
	d := max(2*time.Second, e.o.duration*3/4)
	runs := []struct {
		scenario string
		s        *server
	}{{scenGeoOff, off}, {scenGeoOn, on}}
	for i := 1; i <= max(1, e.o.pairs); i++ {
		order := runs
		if i%2 == 0 {
			order = []struct {
				scenario string
				s        *server
			}{runs[1], runs[0]}
		}
		for _, x := range order {
			before, err := edgeMetrics(e.ctx, x.s.url)
			if err != nil {
				return err
			}
			r, err := e.wrk(x.s, x.scenario, "pinned", i, lua, d)
			if err != nil {
				return err
			}
			// The clicks of the run, published after it (the publisher
			// flushes every 200 ms): their lookups belong to this run.
			time.Sleep(500 * time.Millisecond)
			if err := e.edgeDelta(&r, x.s, before); err != nil {
				return err
			}
			e.res.runs = append(e.res.runs, r)
		}
		o := e.res.pick(scenGeoOff, "pinned", off.name, func(x runRec) float64 { return x.perCPU })
		n := e.res.pick(scenGeoOn, "pinned", on.name, func(x runRec) float64 { return x.perCPU })
		fmt.Printf("   geo pair %2d  off %9.0f req/CPU-s  on %9.0f req/CPU-s  on/off %.3f\n", i, o[len(o)-1], n[len(n)-1], n[len(n)-1]/o[len(o)-1])
	}
	return nil
}
