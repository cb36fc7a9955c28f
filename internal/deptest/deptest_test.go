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

func listModule(t *testing.T) map[string]*pkg {
	t.Helper()
	// -e: another package's broken build must not hide these rules.
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Name,Imports,TestImports,XTestImports,Deps,Error", mod+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = &p
	}
	return pkgs
}

// withTests is every package p's code and tests depend on, transitively.
func withTests(pkgs map[string]*pkg, p *pkg) []string {
	seen := map[string]bool{}
	for _, direct := range slices.Concat(p.Imports, p.Deps, p.TestImports, p.XTestImports) {
		seen[direct] = true
		if q := pkgs[direct]; q != nil {
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

// TestImportRules fails on every import that breaks one of the rules, one
// subtest a rule, each naming the importer and what it imports.
func TestImportRules(t *testing.T) {
	pkgs := listModule(t)
	var names []string
	for name := range pkgs {
		names = append(names, name)
	}
	slices.Sort(names)
	each := func(f func(p *pkg)) {
		for _, name := range names {
			f(pkgs[name])
		}
	}

	t.Run("SharedImportsNoEdgeControlOrInternal", func(t *testing.T) {
		each(func(p *pkg) {
			if !under(p.ImportPath, "shared") {
				return
			}
			for _, d := range withTests(pkgs, p) {
				if under(d, "edge") || under(d, "control") || under(d, "internal") {
					t.Errorf("%s (or its tests) depends on %s: shared imports the standard library and outside modules only", p.ImportPath, d)
				}
			}
		})
	})

	t.Run("EdgeAndControlNeverImportEachOther", func(t *testing.T) {
		each(func(p *pkg) {
			for side, other := range map[string]string{"edge": "control", "control": "edge"} {
				if !under(p.ImportPath, side) {
					continue
				}
				for _, d := range withTests(pkgs, p) {
					if under(d, other) {
						t.Errorf("%s (or its tests) depends on %s: %s and %s never import each other", p.ImportPath, d, side, other)
					}
				}
			}
		})
	})

	t.Run("OnlyWiringImportsBothSides", func(t *testing.T) {
		each(func(p *pkg) {
			var edge, control string
			for _, imp := range p.Imports {
				if under(imp, "edge") && edge == "" {
					edge = imp
				}
				if under(imp, "control") && control == "" {
					control = imp
				}
			}
			if edge == "" || control == "" {
				return
			}
			wiring := (p.Name == "main" && strings.Contains(p.ImportPath, "/cmd/")) ||
				under(p.ImportPath, "deploy/local") || under(p.ImportPath, "internal/stack")
			if !wiring {
				t.Errorf("%s imports both %s and %s: only a cmd main, deploy/local and internal/stack wire both sides (use internal/stack)", p.ImportPath, edge, control)
			}
		})
	})

	t.Run("TestHelpersOnlyInTests", func(t *testing.T) {
		helpers := []string{"internal/pgtest", "internal/natstest", "internal/snapshottest", "internal/scrape"}
		each(func(p *pkg) {
			if under(p.ImportPath, "internal/stack") || under(p.ImportPath, "bench") {
				return
			}
			for _, imp := range p.Imports {
				for _, h := range helpers {
					if imp == mod+h {
						t.Errorf("%s imports test helper %s outside its _test.go files: only tests, internal/stack and bench/ may", p.ImportPath, imp)
					}
				}
			}
		})
	})

	t.Run("OnlyControlPostgresAndAllocstoreImportPgx", func(t *testing.T) {
		var offenders []string
		each(func(p *pkg) {
			if !under(p.ImportPath, "control") || under(p.ImportPath, "control/postgres") || under(p.ImportPath, "control/allocstore") {
				return
			}
			for _, imp := range p.Imports {
				if imp == "github.com/jackc/pgx/v5" || strings.HasPrefix(imp, "github.com/jackc/pgx/") {
					offenders = append(offenders, fmt.Sprintf("%s imports %s", p.ImportPath, imp))
				}
			}
		})
		if len(offenders) > 0 {
			t.Errorf("outside control/postgres and control/allocstore, control's non-test code must reach the database through them (driver errors are translated there only); %d imports break it:\n  %s",
				len(offenders), strings.Join(offenders, "\n  "))
		}
	})

	t.Run("ListedCleanly", func(t *testing.T) {
		// A package go list could not load would make the rules above
		// pass vacuously for it.
		each(func(p *pkg) {
			if p.Error != nil {
				t.Logf("go list: %s: %s (its imports were checked as far as listed)", p.ImportPath, p.Error.Err)
			}
		})
	})
}
