package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/edgelink/edgelink/bench/measure"
)

// during measures s while fn runs the load. A quiet run (every timed
// comparison; not the warm-up or the soak, which keep the whole system
// running) starts on a quiet machine with the click rollup paused.
func (e *env) during(s *server, quiet bool, fn func() (loadCPU float64, err error)) (u usage, loadCPU float64, err error) {
	if quiet && e.st != nil {
		// The back end first rolls up what earlier runs sent, then rests.
		e.settle()
		e.st.pauseClicks()
		defer e.st.resumeClicks()
	}
	pids := s.pids()
	var extra []int
	if s.extra != nil {
		extra = s.extra()
	}
	c0, _ := measure.Usage(pids)
	x0, _ := measure.Usage(extra)
	m0, err := measure.ReadMachineCPU()
	if err != nil {
		return u, 0, err
	}
	t0 := time.Now()
	loadCPU, err = fn()
	u.wall = time.Since(t0).Seconds()
	c1, _ := measure.Usage(pids)
	x1, _ := measure.Usage(extra)
	m1, _ := measure.ReadMachineCPU()
	u.serverCPU, u.extraCPU, u.machineBusy = c1-c0, x1-x0, m1.Busy-m0.Busy
	return u, loadCPU, err
}

func quietRun(scenario string) bool { return scenario != "warmup" && scenario != "soak" }

// settle waits, up to 20 s, until the machine is quiet (under a tenth of a
// core busy over a quarter second): the previous run's work must not
// spill into the next, like the edge's back end rolling up the clicks of
// the edge's run during whichever server's run comes after it.
func (e *env) settle() {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		m0, err := measure.ReadMachineCPU()
		if err != nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
		m1, err := measure.ReadMachineCPU()
		if err != nil || (m1.Busy-m0.Busy)/0.25 < 0.1 {
			return
		}
	}
	e.res.unsettled++
}

// runLoad runs a load generator command and returns its CPU seconds.
func (e *env) runLoad(argv []string) ([]byte, float64, error) {
	cmd := exec.CommandContext(e.ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	cpu := 0.0
	if cmd.ProcessState != nil {
		cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if err != nil {
		return []byte(out.String()), cpu, fmt.Errorf("%s: %w\n%s", measure.Quote(argv), err, trimLines(out.String(), 20))
	}
	return []byte(out.String()), cpu, nil
}

func (e *env) record(cmd []string) {
	q := measure.Quote(cmd)
	if !slices.Contains(e.commands, q) {
		e.commands = append(e.commands, q)
	}
}

// wrk runs wrk against s and returns the run's record.
func (e *env) wrk(s *server, scenario, variant string, round int, luaFile string, d time.Duration) (runRec, error) {
	cpus := ""
	if variant == "pinned" {
		cpus = e.o.loadCPU
	}
	argv := measure.Pinned(cpus, "wrk", "-t1", fmt.Sprintf("-c%d", e.o.conns), "-d"+durSeconds(d), "--timeout", "5s", "-s", luaFile, s.url)
	e.record(measure.Pinned(cpus, "wrk", "-t1", fmt.Sprintf("-c%d", e.o.conns), "-d"+durSeconds(d), "--timeout", "5s", "-s", filepath.Base(luaFile), "http://127.0.0.1:PORT"))
	var w wrkResult
	u, loadCPU, err := e.during(s, quietRun(scenario), func() (float64, error) {
		out, cpu, err := e.runLoad(argv)
		if err != nil {
			return cpu, err
		}
		w, err = parseWrk(out)
		return cpu, err
	})
	if err != nil {
		return runRec{}, err
	}
	r := runRec{scenario: scenario, variant: variant, server: s.name, round: round, tool: "wrk",
		requests: float64(w.Requests), rps: w.RPS, serverCPU: u.serverCPU, extraCPU: u.extraCPU, loadCPU: loadCPU,
		otherCPU: max(0, u.machineBusy-u.serverCPU-u.extraCPU-loadCPU), wall: u.wall, non3xx: w.Non3xx, sockErr: w.Errors}
	r.perCPU = r.requests / r.serverCPU
	return r, nil
}

// paced runs `suite attack` (the paced open-loop generator) against s at
// the given rate, with conns connections from as many loopback addresses
// (clients, as the edge's per-client policy tells them apart).
func (e *env) paced(s *server, scenario, variant string, round int, file string, rate, conns int, d time.Duration) (runRec, attackResult, error) {
	cpus := ""
	if variant == "pinned" {
		cpus = e.o.loadCPU
	}
	flags := []string{"-rate", fmt.Sprint(rate), "-duration", d.String(), "-connections", fmt.Sprint(conns), "-sources", fmt.Sprint(conns)}
	args := append([]string{"attack", "-url", s.url, "-requests", file}, flags...)
	if s.name == base {
		args = append(args, "-check=false") // a constant answer
	}
	argv := measure.Pinned(cpus, append([]string{e.self}, args...)...)
	e.record(measure.Pinned(cpus, append([]string{"suite", "attack", "-url", "http://127.0.0.1:PORT", "-requests", filepath.Base(file)}, flags...)...))
	var a attackResult
	u, loadCPU, err := e.during(s, quietRun(scenario), func() (float64, error) {
		out, cpu, err := e.runLoad(argv)
		if err != nil {
			return cpu, err
		}
		return cpu, json.Unmarshal(out, &a)
	})
	if err != nil {
		return runRec{}, a, err
	}
	r := runRec{scenario: scenario, variant: variant, server: s.name, round: round, tool: "paced",
		requests: float64(a.Requests), rps: a.Throughput, serverCPU: u.serverCPU, extraCPU: u.extraCPU, loadCPU: loadCPU,
		otherCPU: max(0, u.machineBusy-u.serverCPU-u.extraCPU-loadCPU), wall: u.wall,
		p50: a.P50, p90: a.P90, p99: a.P99, p999: a.P999, pmax: a.Max, wrong: a.Wrong, refused: a.Codes["429"] + a.Codes["503"],
		sockErr: int64(a.Errors), sentRate: a.Rate, unknown: a.Unknown, unknownBy: a.UnknownBy}
	r.perCPU = r.requests / r.serverCPU
	if a.Wrong > 0 {
		e.res.wrong = append(e.res.wrong, fmt.Sprintf("%s %s round %d: %d wrong answers, e.g. %s", scenario, s.name, round, a.Wrong, a.FirstWrong))
	}
	return r, a, nil
}
