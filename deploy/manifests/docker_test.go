package manifests_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A small Dockerfile reader. BuildKit's own parser
// (github.com/moby/buildkit/frontend/dockerfile/parser) resolves here, but
// adding it raises shared dependencies of go-task and go-git
// (filepath-securejoin, go-crypto, fsnotify, prometheus) for everyone, for
// a file this simple; so the syntax handled is what our Dockerfile uses, and
// anything else is refused rather than guessed.

type instruction struct {
	line  int
	cmd   string            // upper case
	flags map[string]string // --from=build, --chown=...
	mount []string          // --mount values, in order
	args  string            // the rest, continuation lines joined
}

type stage struct {
	name, base string
	instrs     []instruction
}

type dockerfile struct {
	args   map[string]string // ARGs before the first FROM, with defaults
	stages []*stage
}

var knownInstructions = []string{"FROM", "RUN", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "USER", "EXPOSE",
	"ENTRYPOINT", "CMD", "LABEL", "HEALTHCHECK", "SHELL", "STOPSIGNAL", "VOLUME"}

func parseDockerfile(text string) (*dockerfile, error) {
	df := &dockerfile{args: map[string]string{}}
	var logical []struct {
		line int
		text string
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	n, start, cur, cont := 0, 0, "", false
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && !cont) {
			continue // comments (and parser directives), also inside a continued instruction
		}
		if !cont {
			start, cur = n, ""
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			cont = true
			continue
		}
		cur += trimmed
		cont = false
		logical = append(logical, struct {
			line int
			text string
		}{start, cur})
	}
	if cont {
		return nil, fmt.Errorf("line %d: the file ends inside a continued instruction", start)
	}
	for _, l := range logical {
		word, rest, _ := strings.Cut(l.text, " ")
		in := instruction{line: l.line, cmd: strings.ToUpper(word), flags: map[string]string{}}
		if word != in.cmd {
			return nil, fmt.Errorf("line %d: write instructions in upper case (%q)", l.line, word)
		}
		if !slices.Contains(knownInstructions, in.cmd) {
			return nil, fmt.Errorf("line %d: unknown instruction %q", l.line, word)
		}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			tok, after, _ := strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
			if k == "mount" {
				in.mount = append(in.mount, v)
			} else {
				in.flags[k] = v
			}
			rest = strings.TrimSpace(after)
		}
		in.args = rest
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := &stage{base: f[0]}
			switch {
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.name = f[2]
			case len(f) != 1:
				return nil, fmt.Errorf("line %d: FROM %s: want IMAGE [AS NAME]", l.line, in.args)
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0:
			if in.cmd != "ARG" {
				return nil, fmt.Errorf("line %d: only ARG may come before the first FROM", l.line)
			}
			k, v, _ := strings.Cut(in.args, "=")
			df.args[k] = v
		default:
			st := df.stages[len(df.stages)-1]
			st.instrs = append(st.instrs, in)
		}
	}
	if len(df.stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return df, nil
}

func (df *dockerfile) stage(name string) *stage {
	for _, s := range df.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

// execForm decodes a JSON array (ENTRYPOINT, CMD); shell form is refused,
// since a distroless image has no shell to run it.
func execForm(in instruction) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(in.args), &out); err != nil {
		return nil, fmt.Errorf("line %d: %s %s: use the exec (JSON) form: %v", in.line, in.cmd, in.args, err)
	}
	return out, nil
}

func readDockerfile(t testing.TB) *dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df, err := parseDockerfile(string(b))
	if err != nil {
		t.Fatalf("deploy/docker/Dockerfile: %v", err)
	}
	return df
}

var goBuildTarget = regexp.MustCompile(`go build [^&;]*?(\./[\w./-]+)`)

// checkDockerfile: what `docker build` would trip over, and the choices the
// images promise (static, distroless, non-root, cached module downloads).
// root is the build context.
func checkDockerfile(t testing.TB, df *dockerfile, root string) (p problems) {
	t.Helper()
	ignored := dockerignore(t, root)

	// The Go image is the version go.mod asks for.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(gomod)
	if goVersion == nil || df.args["GO_VERSION"] != string(goVersion[1]) {
		p.add("ARG GO_VERSION=%s, but go.mod says go %s", df.args["GO_VERSION"], goVersion[1])
	}

	seen := map[string]bool{}
	var built []string
	var copied []string // source folders and files copied from the context
	for _, st := range df.stages {
		if st.name != "" && seen[st.name] {
			p.add("stage %q defined twice", st.name)
		}
		if !seen[st.base] { // not FROM an earlier stage
			os.Expand(st.base, func(k string) string {
				if _, ok := df.args[k]; !ok {
					p.add("FROM %s: ARG %s is not declared before the first FROM", st.base, k)
				}
				return df.args[k]
			})
		}
		for _, in := range st.instrs {
			switch in.cmd {
			case "COPY", "ADD":
				f := strings.Fields(in.args)
				if len(f) < 2 {
					p.add("line %d: %s needs a source and a destination", in.line, in.cmd)
					continue
				}
				if from, ok := in.flags["from"]; ok {
					if !seen[from] {
						p.add("line %d: COPY --from=%s: no earlier stage has that name", in.line, from)
					}
					continue
				}
				for _, src := range f[:len(f)-1] {
					clean := path.Clean(src)
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(clean))); err != nil {
						p.add("line %d: COPY %s: not in the build context: %v", in.line, src, err)
					}
					if ignored(clean) {
						p.add("line %d: COPY %s: .dockerignore leaves it out of the build context", in.line, src)
					}
					copied = append(copied, clean)
				}
			case "RUN":
				for _, m := range goBuildTarget.FindAllStringSubmatch(in.args, -1) {
					built = append(built, m[1])
					var mounts []string
					for _, mt := range in.mount {
						if strings.Contains(mt, "type=cache") {
							_, target, _ := strings.Cut(mt[strings.Index(mt, "target="):], "=")
							target, _, _ = strings.Cut(target, ",")
							mounts = append(mounts, target)
						}
					}
					for _, want := range []string{"/go/pkg/mod", "/root/.cache/go-build"} {
						if !slices.Contains(mounts, want) {
							p.add("line %d: go build %s without a cache mount on %s", in.line, m[1], want)
						}
					}
				}
			}
		}
		if st.name != "" {
			seen[st.name] = true
		}
	}

	// Static binaries, since the final images have no libc.
	if !slices.ContainsFunc(df.stages, func(s *stage) bool {
		return slices.ContainsFunc(s.instrs, func(in instruction) bool {
			return in.cmd == "ENV" && strings.Contains(in.args, "CGO_ENABLED=0")
		})
	}) {
		p.add("no ENV CGO_ENABLED=0: the distroless static images need static binaries")
	}

	// Every go build target is a main package, and what it imports from
	// this module was copied into the build stage.
	if len(built) == 0 {
		p.add("no RUN go build ./...")
		return p
	}
	for _, pkg := range binaries {
		if !slices.Contains(built, pkg) {
			p.add("nothing builds %s", pkg)
		}
	}
	out, err := moduleDeps(root, built)
	if err != nil {
		p.add("go list of the build targets %v: %v\n%s", built, err, out)
		return p
	}
	mainPkgs := map[string]bool{}
	const mod = "github.com/edgelink/edgelink/"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		importPath, name, _ := strings.Cut(line, " ")
		rel := strings.TrimPrefix(importPath, mod)
		if name == "main" {
			mainPkgs["./"+rel] = true
		}
		if !slices.ContainsFunc(copied, func(c string) bool { return rel == c || strings.HasPrefix(rel, c+"/") }) {
			p.add("the build needs %s, which no COPY brings into the build stage (copied: %v)", rel, copied)
		}
	}
	for _, b := range built {
		if !mainPkgs[b] {
			p.add("go build %s: not a main package of this module", b)
		}
	}
	return p
}

var depsCache sync.Map // root and targets → go list output

// moduleDeps lists this module's packages the targets need, with their
// package names ("github.com/edgelink/edgelink/shared/link link").
func moduleDeps(root string, targets []string) ([]byte, error) {
	key := root + "\x00" + strings.Join(targets, "\x00")
	if out, ok := depsCache.Load(key); ok {
		return out.([]byte), nil
	}
	args := append([]string{"list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.ImportPath}} {{.Name}}{{end}}{{end}}"}, targets...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, err
	}
	depsCache.Store(key, out)
	return out, nil
}

// dockerignore reports whether the root .dockerignore excludes a path; only
// the pattern forms we use (a name, a **/ glob) are understood.
func dockerignore(t testing.TB, root string) func(string) bool {
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		if os.IsNotExist(err) {
			return func(string) bool { return false }
		}
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			if strings.HasPrefix(line, "!") {
				t.Fatalf(".dockerignore: exceptions (%s) are not understood by this test", line)
			}
			patterns = append(patterns, strings.TrimSuffix(line, "/"))
		}
	}
	return func(p string) bool {
		parts := strings.Split(p, "/")
		for _, pat := range patterns {
			for i := range parts {
				prefix := strings.Join(parts[:i+1], "/")
				if ok, _ := path.Match(pat, prefix); ok {
					return true
				}
				if rest, ok := strings.CutPrefix(pat, "**/"); ok {
					if m, _ := path.Match(rest, parts[i]); m {
						return true
					}
				}
			}
		}
		return false
	}
}

// checkFinalStages: the control and edge targets run their binary, as a
// non-root user, on a distroless (or scratch) base; their default command
// parses; compose's healthcheck tool is in them.
func checkFinalStages(t testing.TB, df *dockerfile) (p problems) {
	t.Helper()
	for img := range binaries {
		target := path.Base(img)
		st := df.stage(target)
		if st == nil {
			p.add("no stage %q (the target compose builds and the image Kubernetes runs)", target)
			continue
		}
		if !strings.HasPrefix(st.base, "gcr.io/distroless/static") && st.base != "scratch" {
			p.add("stage %s: FROM %s: want distroless static or scratch", target, st.base)
		}
		var user string
		var entry, cmd []string
		dests := map[string]bool{}
		for _, in := range st.instrs {
			var err error
			switch in.cmd {
			case "USER":
				user = in.args
			case "ENTRYPOINT":
				entry, err = execForm(in)
			case "CMD":
				cmd, err = execForm(in)
			case "COPY":
				f := strings.Fields(in.args)
				dests[f[len(f)-1]] = true
			}
			if err != nil {
				p.add("stage %s: %v", target, err)
			}
		}
		uid, _, _ := strings.Cut(user, ":")
		if uid == "" || uid == "0" || uid == "root" {
			p.add("stage %s: USER %q: want a non-root user", target, user)
		}
		if len(entry) != 1 || path.Base(entry[0]) != target || !dests[entry[0]] {
			p.add("stage %s: ENTRYPOINT %v: want the %s binary a COPY puts there", target, entry, target)
		}
		if !dests["/usr/local/bin/httpcheck"] {
			p.add("stage %s: no /usr/local/bin/httpcheck for compose's healthcheck", target)
		}
		p = append(p, checkInvocation(t, invocation{where: "Dockerfile stage " + target + " CMD", image: img, args: cmd})...)
	}
	return p
}

func TestDockerfile(t *testing.T) {
	df := readDockerfile(t)
	checkDockerfile(t, df, repoRoot(t)).report(t)
	checkFinalStages(t, df).report(t)
}

func TestParseDockerfile(t *testing.T) {
	df, err := parseDockerfile(`# syntax=docker/dockerfile:1
ARG GO_VERSION=1.26.8
FROM golang:${GO_VERSION} AS build
RUN --mount=type=cache,target=/go/pkg/mod \
    # a comment inside a continued instruction
    go build -o /out/x ./cmd/x

FROM scratch AS x
COPY --from=build --chown=1:1 /out/x /x
ENTRYPOINT ["/x"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := df.args["GO_VERSION"]; got != "1.26.8" {
		t.Errorf("ARG GO_VERSION = %q", got)
	}
	if len(df.stages) != 2 || df.stages[0].name != "build" || df.stages[1].base != "scratch" {
		t.Fatalf("stages = %+v", df.stages)
	}
	run := df.stages[0].instrs[0]
	if run.cmd != "RUN" || fmt.Sprint(run.mount) != "[type=cache,target=/go/pkg/mod]" || run.args != "go build -o /out/x ./cmd/x" || run.line != 4 {
		t.Errorf("RUN = %+v", run)
	}
	cp := df.stages[1].instrs[0]
	if cp.flags["from"] != "build" || cp.flags["chown"] != "1:1" || cp.args != "/out/x /x" {
		t.Errorf("COPY = %+v", cp)
	}
	for _, bad := range []string{"FROM a\nRUNN x\n", "run x\n", "RUN x\nFROM a\n", "FROM a\nRUN x \\\n"} {
		if _, err := parseDockerfile(bad); err == nil {
			t.Errorf("parseDockerfile(%q) accepted it", bad)
		}
	}
}

// TestDockerfileChecksCatchMistakes breaks a copy of the Dockerfile (and of
// the context's layout) one way at a time.
func TestDockerfileChecksCatchMistakes(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	mutations := []struct{ name, old, new, want string }{
		{"source not copied", "COPY schema/ schema/\n", "", "the build needs schema, which no COPY brings"},
		{"copy of a missing path", "COPY edge/ edge/", "COPY edges/ edges/", "COPY edges/: not in the build context"},
		{"wrong build target", "./edge/cmd/edge &&", "./edge/edgeserver &&", "nothing builds ./edge/cmd/edge"},
		{"no cache mount", "    --mount=type=cache,target=/root/.cache/go-build \\\n    go build -trimpath -ldflags=\"-s -w\" -o /out/control", "    go build -trimpath -ldflags=\"-s -w\" -o /out/control", "without a cache mount on /root/.cache/go-build"},
		{"root user", "USER 65532:65532\nEXPOSE 8081", "USER 0\nEXPOSE 8081", `stage edge: USER "0"`},
		{"fat base", "FROM gcr.io/distroless/static-debian12:nonroot AS control", "FROM debian:12 AS control", "FROM debian:12: want distroless"},
		{"unknown stage", "COPY --from=build-edge /out/edge", "COPY --from=edge-build /out/edge", "COPY --from=edge-build: no earlier stage"},
		{"shell-form entrypoint", `ENTRYPOINT ["/usr/local/bin/edge"]`, `ENTRYPOINT /usr/local/bin/edge`, "use the exec (JSON) form"},
		{"default command not parsed", `CMD ["serve", "--listen=:8080"]`, `CMD ["serve", "--port=8080"]`, "unknown flag --port"},
		{"Go not go.mod's", "ARG GO_VERSION=", "ARG GO_VERSION=1.22-", "ARG GO_VERSION=1.22-"},
		{"undeclared ARG", "ARG GO_VERSION=", "ARG GOLANG_VERSION=", "ARG GO_VERSION is not declared"},
		{"typo", "WORKDIR /src", "WORKDIRR /src", `unknown instruction "WORKDIRR"`},
	}
	root := repoRoot(t)
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if n := strings.Count(string(src), m.old); n != 1 {
				t.Fatalf("the Dockerfile holds %q %d times, want once: update this mutation", m.old, n)
			}
			text := strings.Replace(string(src), m.old, m.new, 1)
			var found problems
			if df, err := parseDockerfile(text); err != nil {
				found.add("%v", err)
			} else {
				found = append(checkDockerfile(t, df, root), checkFinalStages(t, df)...)
			}
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, m.want) }) {
				t.Errorf("after %s, no problem mentions %q; found:\n%s", m.name, m.want, strings.Join(found, "\n"))
			}
		})
	}
}
