package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/gate/evidence"
)

// The fixtures are real `go test -json -timeout 3s ./...` output of a
// small module (example.com/m): ok (a pass and a skip), fails (a failing
// subtest and a t.Fatal beside a pass), broken (a build failure), hangs
// (a timeout in TestHang) and exits (TestMain exits 3 before any test).
const (
	failingJSON = "testdata/failing.json"
	passingJSON = "testdata/passing.json"
)

// evidenceDir writes one passing record per gate statement, or only for
// the statements given, as evidence.Record would.
func evidenceDir(t *testing.T, only ...evidence.Statement) string {
	t.Helper()
	if only == nil {
		only = evidence.Statements
	}
	var b bytes.Buffer
	for _, s := range only {
		line, err := json.Marshal(evidence.Entry{Statement: s, Test: "TestSomething", Package: "outage", Passed: true, Evidence: "seen"})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "records-1.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "go-test.json")
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReport(t *testing.T) {
	passing := readFixture(t, passingJSON)
	lines := strings.SplitAfter(strings.TrimSpace(passing), "\n")
	// go test stopped before the package's last events were written.
	cut := strings.Join(lines[:len(lines)-3], "")
	all := fmt.Sprintf("%d of %d statements pass", len(evidence.Statements), len(evidence.Statements))

	tests := []struct {
		name     string
		dir      string
		args     []string
		status   int
		want     []string
		dontWant []string
	}{
		{
			name: "every statement passes but gate tests failed",
			dir:  evidenceDir(t),
			args: []string{"-tests", failingJSON, "-go-test-status", "1"},
			want: []string{
				all,
				"FAIL example.com/m/fails TestParent/bad: failed",
				"FAIL example.com/m/fails TestParent: failed",
				"FAIL example.com/m/fails TestFatal: failed",
				"FAIL example.com/m/hangs TestHang: did not finish",
				"FAIL example.com/m/broken: build failed: broken/broken_test.go:5:28: undefined: undefinedFunc",
				"FAIL example.com/m/exits: failed outside any test: setup: no database",
				"Launch gate: FAIL",
				"gate: 4 passed, 6 failed, 1 skipped",
			},
			dontWant: []string{"TestOK", "TestQuick", "TestFine", "TestParent/good", "Every gate test passed"},
			status:   1,
		},
		{
			name: "statements and tests pass",
			dir:  evidenceDir(t),
			args: []string{"-tests", passingJSON},
			want: []string{"Launch gate statements", all, "Every gate test passed (1 passed, 1 skipped)", "Launch gate: PASS", "gate: 1 passed, 0 failed, 1 skipped"},
			// The statements speak for themselves: no document outside
			// the repository is named.
			dontWant: []string{"seed"},
			status:   0,
		},
		{
			name:     "go test failed without naming a test",
			dir:      evidenceDir(t),
			args:     []string{"-tests", passingJSON, "-go-test-status", "2"},
			want:     []string{"FAIL go test: exited with status 2 without naming a failed test or package", "Launch gate: FAIL", "gate: 1 passed, 1 failed, 1 skipped"},
			dontWant: []string{"Every gate test passed"},
			status:   1,
		},
		{
			name:   "go test stopped mid-package",
			dir:    evidenceDir(t),
			args:   []string{"-tests", writeFile(t, cut), "-go-test-status", "1"},
			want:   []string{"FAIL example.com/m/ok: did not finish (go test stopped before the package ended)", "Launch gate: FAIL"},
			status: 1,
		},
		{
			name:   "no test events at all",
			dir:    evidenceDir(t),
			args:   []string{"-tests", writeFile(t, "")},
			want:   []string{"FAIL go test: its -json output holds no test events", "Launch gate: FAIL"},
			status: 1,
		},
		{
			name:     "tests pass but a statement has no evidence",
			dir:      evidenceDir(t, evidence.UniqueIDs),
			args:     []string{"-tests", passingJSON},
			want:     []string{"no test recorded evidence for this statement", fmt.Sprintf("1 of %d statements pass", len(evidence.Statements)), "Every gate test passed", "Launch gate: FAIL"},
			dontWant: []string{"Launch gate: PASS"},
			status:   1,
		},
		{
			name:     "statements only, without go test output",
			dir:      evidenceDir(t),
			want:     []string{all, "Launch gate: PASS"},
			dontWant: []string{"\ngate: "},
			status:   0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"-dir", tt.dir}, tt.args...)
			status := run(args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
			out := stdout.String()
			if status != tt.status {
				t.Errorf("report %q exited %d, want %d\nstdout:\n%s\nstderr:\n%s", args, status, tt.status, out, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("report %q does not say %q:\n%s", args, w, out)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(out, w) {
					t.Errorf("report %q says %q, which it should not:\n%s", args, w, out)
				}
			}
		})
	}
}

func TestReportCannotRead(t *testing.T) {
	for _, args := range [][]string{
		{"-dir", t.TempDir(), "-tests", filepath.Join(t.TempDir(), "missing.json")},
		{"-tests", passingJSON},
		{"-no-such-flag"},
	} {
		var stdout, stderr bytes.Buffer
		if status := run(args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr); status != 2 {
			t.Errorf("report %q exited %d, want 2 (cannot read its input)\nstdout:\n%s\nstderr:\n%s", args, status, stdout.String(), stderr.String())
		}
	}
}

// The stream keeps the JSON byte for byte and shows what plain go test
// would: failed and stopped tests' output, build errors, package lines.
func TestStream(t *testing.T) {
	in := readFixture(t, failingJSON) + readFixture(t, passingJSON)
	raw := filepath.Join(t.TempDir(), "go-test.json")
	var stdout, stderr bytes.Buffer
	if status := run([]string{"-stream", raw}, func(string) string { return "" }, strings.NewReader(in), &stdout, &stderr); status != 0 {
		t.Fatalf("stream exited %d, want 0\nstderr:\n%s", status, stderr.String())
	}
	if got := readFixture(t, raw); got != in {
		t.Errorf("stream copied %d bytes of %d, or changed them", len(got), len(in))
	}
	out := stdout.String()
	for _, w := range []string{
		"undefined: undefinedFunc",
		"    fails_test.go:7: what it saw\n",
		"promoted replica has 1,4, want 1,2,4",
		"--- FAIL: TestParent/bad",
		"--- FAIL: TestFatal",
		"FAIL\texample.com/m/fails\t",
		"panic: test timed out after 3s",
		"FAIL\texample.com/m/hangs\t",
		"setup: no database",
		"FAIL\texample.com/m/exits\t",
		"ok  \texample.com/m/ok\t",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("stream output lacks %q:\n%s", w, out)
		}
	}
	for _, w := range []string{"a log line of a passing test", "not on this machine", "TestOK", "TestQuick", "PASS\n"} {
		if strings.Contains(out, w) {
			t.Errorf("stream output shows %q, which plain go test hides:\n%s", w, out)
		}
	}
}
