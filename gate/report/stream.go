package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// stream copies a `go test -json` stream from in to raw unchanged, for
// readResults later, and prints to out what plain `go test` would have:
// build errors, the whole output of every failed test, the output of
// tests a timeout or panic stopped, and one line per package ("ok", "FAIL").
// Passing and skipped tests' output is dropped, as `go test` does without
// -v. Lines that are not events are printed as they are.
//
// It returns the first error writing raw or out; a failed test is not an
// error here (readResults and the exit status of go test judge that).
func stream(in io.Reader, raw, out io.Writer) error {
	type pkgOut struct {
		tests map[string][]string // output of tests still running
		own   []string            // output outside any test
	}
	pkgs := map[string]*pkgOut{}
	w := bufio.NewWriter(out)
	emit := func(lines []string) error {
		for _, l := range lines {
			if _, err := w.WriteString(l); err != nil {
				return err
			}
		}
		// Flushed per package or failure, so a long gate shows progress.
		return w.Flush()
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if _, err := fmt.Fprintf(raw, "%s\n", line); err != nil {
			return fmt.Errorf("copy go test -json: %w", err)
		}
		e, ok := parseEvent(line)
		if !ok {
			if err := emit([]string{string(line) + "\n"}); err != nil {
				return err
			}
			continue
		}
		if e.Action == "build-output" {
			if err := emit([]string{e.Output}); err != nil {
				return err
			}
			continue
		}
		p, ok := pkgs[e.Package]
		if !ok {
			p = &pkgOut{tests: map[string][]string{}}
			pkgs[e.Package] = p
		}
		switch {
		case e.Action == "output" && e.Test != "":
			p.tests[e.Test] = append(p.tests[e.Test], e.Output)
		case e.Action == "output":
			// "PASS" alone is what -v prints before "ok"; go test hides it.
			if strings.TrimSpace(e.Output) != "PASS" {
				p.own = append(p.own, e.Output)
			}
		case e.Test != "" && e.Action == "fail":
			// A failed subtest's lines join its parent's, which fails too,
			// so they come out in the order go test prints them.
			lines := p.tests[e.Test]
			delete(p.tests, e.Test)
			if i := strings.LastIndexByte(e.Test, '/'); i > 0 {
				if parent, ok := p.tests[e.Test[:i]]; ok {
					p.tests[e.Test[:i]] = append(parent, lines...)
					continue
				}
			}
			if err := emit(lines); err != nil {
				return err
			}
		case e.Test != "" && (e.Action == "pass" || e.Action == "skip"):
			delete(p.tests, e.Test)
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			// Tests still running when their package ended were stopped by
			// a timeout or a panic: their output holds the trace.
			if err := emit(pending(p.tests, p.own)); err != nil {
				return err
			}
			delete(pkgs, e.Package)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read go test -json: %w", err)
	}
	// A stream cut short (go test stopped) still shows what it had.
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := emit(pending(pkgs[name].tests, pkgs[name].own)); err != nil {
			return err
		}
	}
	return nil
}

// pending is the output of tests that never ended, in name order, then
// the package's own.
func pending(tests map[string][]string, own []string) []string {
	names := make([]string, 0, len(tests))
	for name := range tests {
		names = append(names, name)
	}
	sort.Strings(names)
	var lines []string
	for _, name := range names {
		lines = append(lines, tests[name]...)
	}
	return append(lines, own...)
}
