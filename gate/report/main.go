// Command report prints the launch gate's statements, each with pass or
// fail and the evidence the gate tests recorded for it (see
// gate/evidence), then every gate test that failed, by package and name.
//
// A statement passes only when at least one test checked it and every
// test that checked it passed. The gate passes only when every statement
// does and, given the `go test -json` output (-tests), no test failed or
// stopped unfinished and no package failed outside its tests; a test that
// failed before recording anything leaves its statements looking fine, so
// the statements alone never pass the gate when the tests are known. The
// command exits 1 when the gate fails and 2 when it cannot read its input,
// so `go tool task gate` fails with it.
//
// With -stream FILE it instead copies `go test -json` from standard input
// to FILE and prints what plain `go test` would have, so the terminal
// stays readable while the JSON is kept for the report.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/edgelink/edgelink/gate/evidence"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", getenv(evidence.EnvDir), "directory of evidence records")
	tests := fs.String("tests", "", "`file` of go test -json output for the gate's tests")
	status := fs.Int("go-test-status", 0, "exit status of the go test run that wrote -tests")
	streamTo := fs.String("stream", "", "copy go test -json from standard input to `file`, printing plain go test output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *streamTo != "" {
		return streamFile(*streamTo, stdin, stdout, stderr)
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "report: no evidence directory (-dir or $"+evidence.EnvDir+")")
		return 2
	}
	g := gateRun{GoTestStatus: *status, Module: module()}
	var err error
	if g.Records, err = evidence.Load(*dir); err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	if *tests != "" {
		f, err := os.Open(*tests)
		if err != nil {
			fmt.Fprintln(stderr, "report:", err)
			return 2
		}
		res, err := readResults(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "report: %s: %v\n", *tests, err)
			return 2
		}
		g.Tests = &res
	}
	if !g.write(stdout) {
		return 1
	}
	return 0
}

func streamFile(name string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, err := os.Create(name)
	if err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	err = stream(stdin, f, stdout)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	return 0
}

// module is the main module's path, trimmed from package paths; empty
// when the binary carries no build information.
func module() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Path
	}
	return ""
}
