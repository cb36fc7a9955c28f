// Package manifests_test checks what operators run edgelink with: the
// Kubernetes manifests in deploy/kubernetes, the compose file in
// deploy/compose and the Dockerfile in deploy/docker. Nothing here needs a
// cluster, a Docker daemon or the network: manifests are rendered with
// kustomize's own library and decoded strictly into the Kubernetes API's Go
// types, the compose file is loaded by the compose specification's own
// loader, and every command line given to control or edge is parsed by the
// real binaries.
package manifests_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/internal/pgtest"
)

// repoRoot is the module's root, two folders up from this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	return root
}

// binaries maps an image name (without tag) to the command it runs and the
// package it is built from.
var binaries = map[string]string{
	"edgelink/control": "./control/cmd/control",
	"edgelink/edge":    "./edge/cmd/edge",
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// TestMain stops the shared PostgreSQL server (internal/pgtest) and
// removes the binaries built for the flag checks.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// binary builds control and edge once per test process (the build cache
// makes it cheap after the first time) and returns the path of the one the
// image runs.
func binary(t testing.TB, image string) string {
	t.Helper()
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "edgelink-manifests-")
		if buildErr != nil {
			return
		}
		// One go command builds both (in parallel); each binary is named
		// after its package's folder, as the image names are.
		args := []string{"build", "-o", builtDir + string(filepath.Separator)}
		for _, pkg := range binaries {
			args = append(args, pkg)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if _, ok := binaries[image]; !ok {
		t.Fatalf("no binary for image %q", image)
	}
	return filepath.Join(builtDir, filepath.Base(image))
}

// invocation is one way a manifest starts control or edge: the image's
// entrypoint with args, and the environment it sees.
type invocation struct {
	where string // for messages: file, object and container
	image string // without tag
	args  []string
	env   map[string]string
}

var (
	// A flag's entry in kong's help starts on its own line.
	helpFlagLine = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)
	helpEnv      = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)
)

// flagsOf maps each environment variable named in kong's help to its flag.
func flagsOf(help string) (envToFlag map[string]string, flags map[string]bool) {
	envToFlag, flags = map[string]string{}, map[string]bool{}
	current := ""
	for _, line := range strings.Split(help, "\n") {
		if m := helpFlagLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			flags[current] = true
		} else if strings.TrimSpace(line) == "" || !strings.HasPrefix(line, " ") {
			current = ""
		}
		if current == "" {
			continue
		}
		for _, m := range helpEnv.FindAllStringSubmatch(line, -1) {
			envToFlag[m[1]] = current
		}
	}
	return envToFlag, flags
}

// checkInvocation has the real binary parse the invocation. kong parses
// every argument (commands, flag names, flag value types) before it acts on
// --help, so `bin ARGS --help` exits 0 only when ARGS are valid; the help it
// prints names the environment variables the selected command reads, and
// each EDGELINK_* variable the manifest sets must be one of them. The
// variables' values are then given as their flags, so kong checks their
// types too (kong itself ignores an environment variable it does not know,
// which is exactly the mistake this catches).
func checkInvocation(t testing.TB, inv invocation) (p problems) {
	t.Helper()
	bin := binary(t, inv.image)
	help, err := runHelp(bin, inv.args)
	if err != nil {
		p.add("%s: %s %s --help: %v", inv.where, filepath.Base(bin), strings.Join(inv.args, " "), err)
		return p
	}
	envToFlag, flags := flagsOf(help)
	if len(flags) == 0 {
		t.Fatalf("%s: found no flags in the help of %s:\n%s", inv.where, bin, help)
	}
	given := map[string]bool{}
	for _, a := range inv.args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			given[name] = true
		}
	}
	var asFlags []string
	names := make([]string, 0, len(inv.env))
	for name := range inv.env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasPrefix(name, "EDGELINK_") {
			continue
		}
		flag, ok := envToFlag[name]
		if !ok {
			p.add("%s: sets %s, which `%s %s --help` does not read (it reads %v)",
				inv.where, name, filepath.Base(bin), strings.Join(inv.args, " "), keys(envToFlag))
			continue
		}
		if !given[flag] {
			asFlags = append(asFlags, "--"+flag+"="+inv.env[name])
		}
	}
	if _, err := runHelp(bin, append(append([]string(nil), inv.args...), asFlags...)); err != nil {
		p.add("%s: the environment's values, as flags, do not parse: %v", inv.where, err)
	}
	return p
}

// problems are what a check found wrong, one sentence each.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// report fails t with every problem.
func (p problems) report(t testing.TB) {
	t.Helper()
	for _, s := range p {
		t.Error(s)
	}
}

// helpCache memoizes runHelp: the mutation tests ask the same questions
// many times.
var helpCache sync.Map

type helpAnswer struct {
	out string
	err error
}

func runHelp(bin string, args []string) (string, error) {
	key := bin + "\x00" + strings.Join(args, "\x00")
	if a, ok := helpCache.Load(key); ok {
		return a.(helpAnswer).out, a.(helpAnswer).err
	}
	out, err := runHelpOnce(bin, args)
	helpCache.Store(key, helpAnswer{out, err})
	return out, err
}

func runHelpOnce(bin string, args []string) (string, error) {
	cmd := exec.Command(bin, append(append([]string(nil), args...), "--help")...)
	// The help must not depend on the test's own environment.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// imageName splits "edgelink/control:dev" into its name and tag.
func imageName(ref string) (name, tag string) {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

func TestFlagsOfHelp(t *testing.T) {
	help := `Usage: edge [flags]

Flags:
  -h, --help                       Show context-sensitive help.
      --listen="127.0.0.1:8081"    Address to serve redirects on
                                   ($EDGELINK_EDGE_LISTEN).
      --snapshot-dir=STRING        Folder keeping the newest snapshot,
                                   loaded at boot without NATS (default
                                   .data/edge-<name>; 'none' keeps none)
                                   ($EDGELINK_EDGE_SNAPSHOT_DIR).
      --debug-listen=STRING        pprof ($EDGELINK_DEBUG_LISTEN).
`
	envToFlag, flags := flagsOf(help)
	want := map[string]string{
		"EDGELINK_EDGE_LISTEN":       "listen",
		"EDGELINK_EDGE_SNAPSHOT_DIR": "snapshot-dir",
		"EDGELINK_DEBUG_LISTEN":      "debug-listen",
	}
	if fmt.Sprint(envToFlag) != fmt.Sprint(want) {
		t.Errorf("flagsOf env = %v, want %v", envToFlag, want)
	}
	if !flags["help"] || !flags["snapshot-dir"] || len(flags) != 4 {
		t.Errorf("flagsOf flags = %v", flags)
	}
}

var literalsCache sync.Map // dir → map[string]bool

// stringLiterals are the string constants in a package's non-test Go files.
func stringLiterals(t testing.TB, dir string) map[string]bool {
	t.Helper()
	if m, ok := literalsCache.Load(dir); ok {
		return m.(map[string]bool)
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[s] = true
				}
			}
			return true
		})
	}
	if len(out) == 0 {
		t.Fatalf("no string literals in %s", dir)
	}
	literalsCache.Store(dir, out)
	return out
}
