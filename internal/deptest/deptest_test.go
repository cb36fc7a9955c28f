package deptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/edgelink/edgelink/"

// pkg is what `go list -json` says of one package of the module.
type pkg struct {
	ImportPath, Name                         string
	Imports, TestImports, XTestImports, Deps []string
	Error                                    *struct{ Err string }
}

// under reports whether path is the package dir or below it (dir relative
// to the module, no trailing slash).
func under(path, dir string) bool {
	return path == mod+dir || strings.HasPrefix(path, mod+dir+"/")
}

// module is the module's packages by import path.
type module map[string]*pkg

func listModule(t *testing.T) module {
	t.Helper()
	// -e: another package's broken build must not hide these rules.
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Name,Imports,TestImports,XTestImports,Deps,Error", mod+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		m[p.ImportPath] = &p
	}
	return m
}

// each calls f with every package in import-path order.
func (m module) each(f func(p *pkg)) {
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for name := range m {
			if !yield(name) {
				return
			}
		}
	}) {
		f(m[name])
	}
}

// withTests is every package p's code and tests depend on, transitively.
func (m module) withTests(p *pkg) []string {
	seen := map[string]bool{}
	for _, direct := range slices.Concat(p.Imports, p.Deps, p.TestImports, p.XTestImports) {
		seen[direct] = true
		if q := m[direct]; q != nil {
			for _, d := range q.Deps {
				seen[d] = true
			}
		}
	}
	delete(seen, p.ImportPath) // an external test package imports its own
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// rule is one import rule: check returns a sentence for every import that
// breaks it.
type rule struct {
	name  string
	check func(m module) []string
}

var helpers = []string{"internal/pgtest", "internal/natstest", "internal/snapshottest", "internal/scrape", "internal/poll", "control/idalloc/idalloctest"}

// rules are the architecture's import rules.
func rules() []rule {
	return []rule{
		{"SharedImportsNoEdgeControlOrInternal", func(m module) (bad []string) {
			m.each(func(p *pkg) {
				if !under(p.ImportPath, "shared") {
					return
				}
				for _, d := range m.withTests(p) {
					if under(d, "edge") || under(d, "control") || under(d, "internal") {
						bad = append(bad, fmt.Sprintf("%s (or its tests) depends on %s: shared imports the standard library and outside modules only", p.ImportPath, d))
					}
				}
			})
			return bad
		}},
		{"EdgeAndControlNeverImportEachOther", func(m module) (bad []string) {
			m.each(func(p *pkg) {
				for _, sides := range [][2]string{{"edge", "control"}, {"control", "edge"}} {
					if !under(p.ImportPath, sides[0]) {
						continue
					}
					for _, d := range m.withTests(p) {
						if under(d, sides[1]) {
							bad = append(bad, fmt.Sprintf("%s (or its tests) depends on %s: %s and %s never import each other", p.ImportPath, d, sides[0], sides[1]))
						}
					}
				}
			})
			return bad
		}},
		{"OnlyWiringImportsBothSides", func(m module) (bad []string) {
			m.each(func(p *pkg) {
				edge := slices.IndexFunc(p.Imports, func(s string) bool { return under(s, "edge") })
				control := slices.IndexFunc(p.Imports, func(s string) bool { return under(s, "control") })
				if edge < 0 || control < 0 {
					return
				}
				// A benchmark's main runs both sides on one machine, as a
				// cmd main does in production.
				wiring := (p.Name == "main" && (strings.Contains(p.ImportPath, "/cmd/") || under(p.ImportPath, "bench"))) ||
					under(p.ImportPath, "deploy/local") || under(p.ImportPath, "internal/stack")
				if !wiring {
					bad = append(bad, fmt.Sprintf("%s imports both %s and %s: only a cmd or benchmark main, deploy/local and internal/stack wire both sides (use internal/stack)",
						p.ImportPath, p.Imports[edge], p.Imports[control]))
				}
			})
			return bad
		}},
		{"TestHelpersOnlyInTests", func(m module) (bad []string) {
			m.each(func(p *pkg) {
				// A helper is test code itself: it may build on another.
				if under(p.ImportPath, "internal/stack") || under(p.ImportPath, "bench") || slices.ContainsFunc(helpers, func(h string) bool { return p.ImportPath == mod+h }) {
					return
				}
				for _, imp := range p.Imports {
					for _, h := range helpers {
						if imp == mod+h {
							bad = append(bad, fmt.Sprintf("%s imports test helper %s outside its _test.go files: only tests, internal/stack and bench/ may", p.ImportPath, imp))
						}
					}
				}
			})
			return bad
		}},
		{"NoConsoleInTheEdge", func(m module) (bad []string) {
			// Page rendering never shares a process with the redirect
			// path: neither the console nor a template engine is in
			// any edge package, its tests included.
			m.each(func(p *pkg) {
				if !under(p.ImportPath, "edge") {
					return
				}
				for _, d := range m.withTests(p) {
					if under(d, "control/console") || d == "html/template" || d == "text/template" {
						bad = append(bad, fmt.Sprintf("%s (or its tests) depends on %s: the console and page rendering stay out of the edge", p.ImportPath, d))
					}
				}
			})
			return bad
		}},
		{"OnlyControlPostgresAndAllocstoreImportPgx", func(m module) (bad []string) {
			m.each(func(p *pkg) {
				// The console's own store (its sessions and key listing)
				// is the third, as allocstore is the allocator's; the
				// webhooks' store the fourth; the import jobs' the fifth.
				if !under(p.ImportPath, "control") || under(p.ImportPath, "control/postgres") || under(p.ImportPath, "control/allocstore") ||
					under(p.ImportPath, "control/console/pgstore") || under(p.ImportPath, "control/webhooks/pgstore") ||
					under(p.ImportPath, "control/importjobs/pgstore") {
					return
				}
				for _, imp := range p.Imports {
					if strings.HasPrefix(imp, "github.com/jackc/pgx/") {
						bad = append(bad, fmt.Sprintf("%s imports %s: outside control/postgres and control/allocstore, control's non-test code reaches the database through them (driver errors are translated there only)", p.ImportPath, imp))
					}
				}
			})
			return bad
		}},
		{"ClientDataStaysOffTheResponsePath", func(m module) (bad []string) {
			// The handler hands the client's address to the click
			// recorder and no further: clicks' country lookups and
			// visitor hashes are the publisher's (edge/clickpub), and
			// the salts are never in the handler. The one exception is
			// a routing rule's country condition (issue 23): it asks
			// the CountryLookup edgeserver injects (edge/geo's table)
			// on the request, and keeps nothing of the address; the
			// handler still imports neither package, so it cannot keep,
			// hash or publish client data on its own.
			m.each(func(p *pkg) {
				if !under(p.ImportPath, "edge/redirect") {
					return
				}
				for _, imp := range p.Imports {
					if under(imp, "edge/geo") || under(imp, "edge/visitorsalt") {
						bad = append(bad, fmt.Sprintf("%s imports %s: country and visitor hash are derived off the response path, in edge/clickpub's publisher (a rule's country comes through the injected redirect.CountryLookup)", p.ImportPath, imp))
					}
				}
			})
			return bad
		}},
		{"GeoDataStaysInEdgeGeo", func(m module) (bad []string) {
			// Country lookup is the edge's: edge/geo imports nothing of
			// the module (a leaf any edge package may hold), and the
			// MaxMind DB reader is read only there, at load.
			m.each(func(p *pkg) {
				for _, imp := range p.Imports {
					if under(p.ImportPath, "edge/geo") && strings.HasPrefix(imp, mod) {
						bad = append(bad, fmt.Sprintf("%s imports %s: edge/geo is a leaf", p.ImportPath, imp))
					}
					if strings.HasPrefix(imp, "github.com/oschwald/maxminddb-golang") && !under(p.ImportPath, "edge/geo") {
						bad = append(bad, fmt.Sprintf("%s imports %s: .mmdb files are read by edge/geo only", p.ImportPath, imp))
					}
				}
				if !under(p.ImportPath, "edge") {
					for _, imp := range p.Imports {
						if under(imp, "edge/geo") && !under(p.ImportPath, "bench") && !under(p.ImportPath, "internal/stack") && !under(p.ImportPath, "deploy/local") {
							bad = append(bad, fmt.Sprintf("%s imports %s: country lookup is the edge's", p.ImportPath, imp))
						}
					}
				}
			})
			return bad
		}},
	}
}

// TestImportRules fails on every import that breaks one of the rules, one
// subtest a rule, each naming the importer and what it imports.
func TestImportRules(t *testing.T) {
	m := listModule(t)
	m.each(func(p *pkg) {
		// A package go list could not load is checked as far as it was
		// listed; say so, so a rule does not pass for it unseen.
		if p.Error != nil {
			t.Logf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
	})
	for _, r := range rules() {
		t.Run(r.name, func(t *testing.T) {
			if bad := r.check(m); len(bad) > 0 {
				t.Errorf("%d imports break the rule:\n  %s", len(bad), strings.Join(bad, "\n  "))
			}
		})
	}
}

// TestRulesCatchViolations gives each rule a module that breaks it, and
// one that keeps it: a rule that cannot fail would pass the tree unseen.
func TestRulesCatchViolations(t *testing.T) {
	p := func(path, name string, imports ...string) *pkg {
		return &pkg{ImportPath: mod + path, Name: name, Imports: imports}
	}
	for _, c := range []struct {
		rule      string
		bad, good []*pkg
	}{
		{"SharedImportsNoEdgeControlOrInternal",
			[]*pkg{{ImportPath: mod + "shared/link", TestImports: []string{mod + "internal/pgtest"}}},
			[]*pkg{p("shared/link", "link", "strings")}},
		{"EdgeAndControlNeverImportEachOther",
			[]*pkg{{ImportPath: mod + "edge/store", XTestImports: []string{mod + "control/postgres"}}},
			[]*pkg{p("edge/store", "store", mod+"shared/link")}},
		{"OnlyWiringImportsBothSides",
			[]*pkg{p("gate/report", "main", mod+"edge/edgeserver", mod+"control/controlserver"), p("bench/dataset", "dataset", mod+"edge/x", mod+"control/y")},
			[]*pkg{p("control/cmd/control", "main", mod+"edge/x", mod+"control/y"), p("internal/stack/allinone", "allinone", mod+"edge/x", mod+"control/y"),
				p("bench/suite", "main", mod+"edge/clickpub", mod+"control/clickroll")}},
		{"TestHelpersOnlyInTests",
			[]*pkg{p("edge/redirect", "redirect", mod+"internal/scrape")},
			[]*pkg{p("bench/suite", "main", mod+"internal/scrape"), {ImportPath: mod + "edge/redirect", TestImports: []string{mod + "internal/natstest"}},
				p("internal/natstest", "natstest", mod+"internal/poll")}},
		{"NoConsoleInTheEdge",
			[]*pkg{p("edge/cmd/edge", "main", mod+"control/console"), {ImportPath: mod + "edge/redirect", TestImports: []string{"html/template"}}},
			[]*pkg{p("edge/cmd/edge", "main", mod+"edge/edgeserver"), p("control/cmd/control", "main", mod+"control/console")}},
		{"OnlyControlPostgresAndAllocstoreImportPgx",
			[]*pkg{p("control/links", "links", "github.com/jackc/pgx/v5/pgxpool"), p("control/console", "console", "github.com/jackc/pgx/v5"),
				p("control/importjobs", "importjobs", "github.com/jackc/pgx/v5")},
			[]*pkg{p("control/postgres", "postgres", "github.com/jackc/pgx/v5"), p("control/allocstore", "allocstore", "github.com/jackc/pgx/v5/pgxpool"),
				p("control/console/pgstore", "pgstore", "github.com/jackc/pgx/v5/pgxpool"), p("control/webhooks/pgstore", "pgstore", "github.com/jackc/pgx/v5"),
				p("control/importjobs/pgstore", "pgstore", "github.com/jackc/pgx/v5/pgxpool")}},
		{"ClientDataStaysOffTheResponsePath",
			[]*pkg{p("edge/redirect", "redirect", mod+"edge/visitorsalt", mod+"edge/geo")},
			[]*pkg{p("edge/redirect", "redirect", mod+"edge/clickpub", "net/netip"), p("edge/clickpub", "clickpub", mod+"edge/visitorsalt"),
				{ImportPath: mod + "edge/redirect", TestImports: []string{mod + "edge/visitorsalt"}}}},
		{"GeoDataStaysInEdgeGeo",
			[]*pkg{p("edge/geo", "geo", mod+"shared/link"), p("edge/clickpub", "clickpub", "github.com/oschwald/maxminddb-golang/v2"),
				p("control/clickroll", "clickroll", mod+"edge/geo")},
			[]*pkg{p("edge/geo", "geo", "github.com/oschwald/maxminddb-golang/v2", "net/netip"), p("edge/edgeserver", "edgeserver", mod+"edge/geo"),
				p("internal/stack/allinone", "allinone", mod+"edge/geo"), p("bench/suite", "main", mod+"edge/geo")}},
	} {
		i := slices.IndexFunc(rules(), func(r rule) bool { return r.name == c.rule })
		if i < 0 {
			t.Fatalf("no rule %s", c.rule)
		}
		r := rules()[i]
		asModule := func(ps []*pkg) module {
			m := module{}
			for _, q := range ps {
				m[q.ImportPath] = q
			}
			return m
		}
		if bad := r.check(asModule(c.bad)); len(bad) == 0 {
			t.Errorf("%s: a module that breaks it passes", c.rule)
		}
		if bad := r.check(asModule(c.good)); len(bad) > 0 {
			t.Errorf("%s: a module that keeps it fails: %v", c.rule, bad)
		}
	}
}
