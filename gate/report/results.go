package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`). Build
// output (Go 1.24 and later) carries ImportPath instead of Package.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
	ImportPath  string
}

// parseEvent reads one line of `go test -json`; ok is false for a line
// that is not an event (the go command's own messages, if they were
// merged into the stream).
func parseEvent(line []byte) (event, bool) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
		return event{}, false
	}
	return e, true
}

// failure is one reason the gate tests did not all pass: a test that
// failed or never finished, or a package that failed outside its tests.
type failure struct {
	Package string
	Test    string // empty when the package failed as a whole
	Why     string
}

// results is what a `go test -json` stream says about the tests in it.
type results struct {
	Events          int
	Passed, Skipped int // tests, subtests included
	Failures        []failure
}

type pkgState struct {
	started  map[string]bool // tests that ran, until they end
	failed   bool            // some test in it failed
	end      string          // the package's own pass, fail or skip
	build    string          // FailedBuild, when its build failed
	lastLine string          // the package's last output outside any test
}

// readResults tallies a `go test -json` stream. It names every failed
// test; every test that started and never ended (a timeout or a panic
// stops the binary mid-test); every package that failed with no failing
// test (a build failure, TestMain, an init panic); and every package that
// started and never ended (go test itself was stopped).
func readResults(r io.Reader) (results, error) {
	var res results
	pkgs := map[string]*pkgState{}
	var order []string
	pkg := func(name string) *pkgState {
		p, ok := pkgs[name]
		if !ok {
			p = &pkgState{started: map[string]bool{}}
			pkgs[name] = p
			order = append(order, name)
		}
		return p
	}
	buildOut := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		e, ok := parseEvent(sc.Bytes())
		if !ok {
			continue
		}
		res.Events++
		if e.Action == "build-output" {
			buildOut[e.ImportPath] = append(buildOut[e.ImportPath], e.Output)
			continue
		}
		if e.Package == "" {
			continue
		}
		p := pkg(e.Package)
		if e.Test == "" {
			switch e.Action {
			case "pass", "fail", "skip":
				p.end, p.build = e.Action, e.FailedBuild
			case "output":
				if l := strings.TrimSpace(e.Output); l != "" && !strings.HasPrefix(l, "FAIL") && l != "PASS" {
					p.lastLine = l
				}
			}
			continue
		}
		switch e.Action {
		case "run":
			p.started[e.Test] = true
		case "pass":
			res.Passed++
			delete(p.started, e.Test)
		case "skip":
			res.Skipped++
			delete(p.started, e.Test)
		case "fail":
			p.failed = true
			delete(p.started, e.Test)
			res.Failures = append(res.Failures, failure{Package: e.Package, Test: e.Test, Why: "failed"})
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("read go test -json: %w", err)
	}
	for _, name := range order {
		p := pkgs[name]
		unfinished := make([]string, 0, len(p.started))
		for t := range p.started {
			unfinished = append(unfinished, t)
		}
		sort.Strings(unfinished)
		for _, t := range unfinished {
			res.Failures = append(res.Failures, failure{Package: name, Test: t,
				Why: "did not finish (the test binary stopped in it: a timeout or a panic; its output is above)"})
		}
		switch {
		case p.end == "" && len(unfinished) == 0:
			res.Failures = append(res.Failures, failure{Package: name, Why: "did not finish (go test stopped before the package ended)"})
		case p.end == "fail" && p.build != "":
			res.Failures = append(res.Failures, failure{Package: name, Why: "build failed: " + firstError(buildOut[p.build])})
		case p.end == "fail" && !p.failed && len(unfinished) == 0:
			why := "failed outside any test"
			if p.lastLine != "" {
				why += ": " + p.lastLine
			}
			res.Failures = append(res.Failures, failure{Package: name, Why: why})
		}
	}
	return res, nil
}

// firstError is the first line of a failed build's output that is not
// the "# package" header.
func firstError(lines []string) string {
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return "(no compiler output)"
}
