// Package evidence lets a launch-gate test say which of the gate's
// statements it checks and what it saw (counts, intervals, answers), so
// that `go tool task gate` can print every statement with the evidence
// behind it instead of a bare list of passing test names.
//
// A test calls Record as it learns facts; each record is written when
// the test ends, with whether the test passed, to a JSON-lines file in
// the directory named by $EDGELINK_GATE_REPORT (one file per test
// process, since `go test` runs packages in parallel processes). Without
// that variable records only go to the test log.
package evidence

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Statement is one statement of the launch gate: a property edgelink must
// show before it takes real traffic.
type Statement int

// The launch gate's statements, in order (docs/gate.md lists them).
const (
	UniqueIDs Statement = iota + 1
	DisjointIntervals
	UnknownCommitsUnpublished
	Jumpable
	ReserveThenReject
	NoRollback
	WasteAccounted
	ContractUnderLag
	// Issue 20's statements, beyond seed 000's eight.
	DomainIsolation
	NonEnumerable
	// Issue 23's, decided at the edge.
	PasswordGuarded
	RulesRoute
)

// Statements lists every gate statement in order.
var Statements = []Statement{
	UniqueIDs, DisjointIntervals, UnknownCommitsUnpublished, Jumpable,
	ReserveThenReject, NoRollback, WasteAccounted, ContractUnderLag,
	DomainIsolation, NonEnumerable, PasswordGuarded, RulesRoute,
}

var texts = map[Statement]string{
	UniqueIDs:                 "Allocation results are unique and never exceed the six-character boundary.",
	DisjointIntervals:         "All confirmed intervals are non-overlapping in the same namespace.",
	UnknownCommitsUnpublished: "Unknown commits are never published autonomously.",
	Jumpable:                  "Every 201 is immediately jumpable on the defined read path.",
	ReserveThenReject:         "Allocation database loss: the service runs on its known reserve, then rejects within a bound.",
	NoRollback:                "Recovery, failover, deploy and restart never roll back the boundary.",
	WasteAccounted:            "Capacity waste is explainable, auditable and alertable.",
	ContractUnderLag:          "Cache, filter and replica latency do not break the defined contract.",
	DomainIsolation:           "Every 201 redirects on its own domain and on no other; a host no domain has gets 404.",
	NonEnumerable:             "Codes an FF1 domain generates cannot be walked, and never equal a reserved word or a taken code.",
	PasswordGuarded:           "A password link never redirects without its password, never reveals its target before, and resists guessing at the configured rate.",
	RulesRoute:                "A rule link sends iOS, Android and desktop clients to their three targets, and a country rule follows the geo data.",
}

func (s Statement) String() string {
	if t, ok := texts[s]; ok {
		return t
	}
	return fmt.Sprintf("statement %d", int(s))
}

// EnvDir names the directory records are written to.
const EnvDir = "EDGELINK_GATE_REPORT"

// Entry is one test's evidence for one statement, as written.
type Entry struct {
	Statement Statement `json:"statement"`
	Test      string    `json:"test"`
	Package   string    `json:"package,omitempty"`
	Passed    bool      `json:"passed"`
	Evidence  string    `json:"evidence"`
	At        time.Time `json:"at"`
}

// Record notes that the running test checks statement s and saw what the
// message says. It is written when the test ends, marked passed only if
// the test (with its subtests) passed, so evidence from a failing test
// never counts for the gate.
func Record(t testing.TB, s Statement, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Logf("gate %d evidence: %s", int(s), msg)
	dir := os.Getenv(EnvDir)
	if dir == "" {
		return
	}
	pkg, _ := os.Getwd()
	rec := Entry{Statement: s, Test: t.Name(), Package: filepath.Base(pkg), Evidence: msg}
	t.Cleanup(func() {
		rec.Passed = !t.Failed() && !t.Skipped()
		rec.At = time.Now().UTC()
		if err := write(dir, rec); err != nil {
			t.Errorf("gate evidence not written: %v", err)
		}
	})
}

var mu sync.Mutex

func write(dir string, rec Entry) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("records-%d.jsonl", os.Getpid())),
		os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Load reads every record written to dir.
func Load(dir string) ([]Entry, error) {
	files, err := filepath.Glob(filepath.Join(dir, "records-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var r Entry
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", name, i+1, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}
