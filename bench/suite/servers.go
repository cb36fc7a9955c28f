package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// The baselines this binary serves itself (`suite serve KIND`). Each reads
// the run's links file (code TAB url per line) and answers GET /{code} with
// 302 and the link's Location, or 404.
const (
	kindBare  = "bare"  // fasthttp, constant 302: the stack's ceiling
	kindGoMap = "gomap" // net/http with a Go map
	kindRedis = "redis" // fasthttp, one Redis GET per request (a cache-aside jump path)
	// kindSnapshot serves a snapshot file through shared/snapshot (cold
	// start and memory only).
	kindSnapshot = "snapshot"
)

// redisKeyPrefix is the usual cache-aside key layout: short:link:{code} → URL.
const redisKeyPrefix = "short:link:"

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	links := fs.String("links", "", "links file: code TAB url per line")
	redisAddr := fs.String("redis", "", "Redis address (redis kind)")
	snapFile := fs.String("snapshot", "", "snapshot file (snapshot kind)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("serve: want one server kind")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	switch kind := fs.Arg(0); kind {
	case kindBare:
		loc := []byte("https://www.northwind-outfitters.com/campaigns/spring-sale?utm_source=newsletter&utm_medium=email")
		return serveFast(ln, func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetBytesV(fasthttp.HeaderLocation, loc)
			ctx.SetStatusCode(fasthttp.StatusFound)
		})
	case kindGoMap:
		m := map[string]string{}
		if err := readLinks(*links, func(code, url string) { m["/"+code] = url }); err != nil {
			return err
		}
		srv := &http.Server{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, ok := m[r.URL.Path]; ok && (r.Method == "GET" || r.Method == "HEAD") {
					w.Header()["Location"] = []string{u}
					w.WriteHeader(http.StatusFound)
					return
				}
				w.WriteHeader(http.StatusNotFound)
			})}
		return srv.Serve(ln)
	case kindRedis:
		rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, PoolSize: 64, MinIdleConns: 8})
		defer rdb.Close()
		return serveFast(ln, func(ctx *fasthttp.RequestCtx) {
			path := ctx.Path()
			if len(path) < 2 {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				return
			}
			u, err := rdb.Get(context.Background(), redisKeyPrefix+string(path[1:])).Result()
			switch {
			case err == redis.Nil:
				ctx.SetStatusCode(fasthttp.StatusNotFound)
			case err != nil:
				ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			default:
				ctx.Response.Header.Set(fasthttp.HeaderLocation, u)
				ctx.SetStatusCode(fasthttp.StatusFound)
			}
		})
	case kindSnapshot:
		// The edge's snapshot layer alone (shared/snapshot), served
		// directly: the edge binary cannot boot from a snapshot yet.
		data, err := os.ReadFile(*snapFile)
		if err != nil {
			return err
		}
		snap, err := snapshot.Open(data)
		if err != nil {
			return err
		}
		return serveFast(ln, func(ctx *fasthttp.RequestCtx) {
			path := ctx.Path()
			if len(path) < 2 {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				return
			}
			e, ok := snap.Lookup(link.DefaultDomain, path[1:])
			if !ok || e.Status != link.Active {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				return
			}
			ctx.Response.Header.SetBytesV(fasthttp.HeaderLocation, e.AppendURL(nil))
			ctx.SetStatusCode(int(e.RedirectType))
		})
	default:
		return fmt.Errorf("serve: unknown kind %q", kind)
	}
}

func serveFast(ln net.Listener, h fasthttp.RequestHandler) error {
	srv := &fasthttp.Server{Handler: h, NoDefaultServerHeader: true, NoDefaultContentType: true,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	return srv.Serve(ln)
}

func readLinks(file string, fn func(code, url string)) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		code, url, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			return fmt.Errorf("%s: bad line %q", file, sc.Text())
		}
		fn(code, url)
	}
	return sc.Err()
}

func writeLinks(file string, codes, urls []string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range codes {
		w.WriteString(codes[i])
		w.WriteByte('\t')
		w.WriteString(urls[i])
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// server is one system under test, running.
type server struct {
	name  string // as reported
	url   string
	pids  func() []int // the server's processes (CPU and memory are summed over them)
	extra func() []int // processes it depends on, reported apart (redis-server)
	note  string
	proc  *measure.Proc
}

// startSelf starts one of this binary's own baselines.
func startSelf(procs *measure.Group, self, kind, linksFile, redisAddr string, logw *os.File, extra ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	argv := []string{self, "serve", "-addr", addr, "-links", linksFile}
	if redisAddr != "" {
		argv = append(argv, "-redis", redisAddr)
	}
	argv = append(argv, extra...)
	p, err := procs.Start(kind, append(argv, kind), "", nil, logw, logw)
	if err != nil {
		return nil, err
	}
	return &server{name: kind, url: "http://" + addr, pids: func() []int { return []int{p.PID()} }, proc: p}, nil
}

// startRedis starts Debian's redis-server on a loopback port with its data
// in a temporary folder, persistence off, and loads the links with
// pipelined SETs (no TTL: the hot set of a cache-aside design that never expires).
func startRedis(ctx context.Context, procs *measure.Group, dir string, codes, urls []string, logw *os.File) (addr string, p *measure.Proc, err error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	addr = "127.0.0.1:" + strconv.Itoa(port)
	rdir := filepath.Join(dir, "redis")
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		return "", nil, err
	}
	p, err = procs.Start("redis-server", []string{"redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--dir", rdir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
		"--maxmemory-policy", "allkeys-lru"}, rdir, nil, logw, logw)
	if err != nil {
		return "", nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			return "", p, errors.New("redis-server did not answer PING within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < len(codes); i += 10_000 {
		pipe := rdb.Pipeline()
		for j := i; j < min(i+10_000, len(codes)); j++ {
			pipe.Set(ctx, redisKeyPrefix+codes[j], urls[j], 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return "", p, fmt.Errorf("load redis: %w", err)
		}
	}
	return addr, p, nil
}

// redisMemory is INFO memory's used_memory.
func redisMemory(ctx context.Context, addr string) (int64, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	s, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no used_memory in INFO")
}

// nginxConf is the nginx baseline: a map from a case-encoded key (see
// dataset.CaseKey) to the target, and return 302. nginx matches map keys
// case-insensitively, so the plain code cannot be the key: the location's
// regex captures the six characters, six tiny regex maps turn each into 1
// (upper case) or 0, and the big map is keyed by "code-mask", lower-cased
// by nginx on both sides.
const nginxConf = `daemon off;
master_process on;
worker_processes auto;
pid {{DIR}}/nginx.pid;
error_log {{DIR}}/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    server_tokens off;
    keepalive_requests 1000000;
    map_hash_max_size {{HASHMAX}};
    map_hash_bucket_size 128;
    client_body_temp_path {{DIR}}/tmp;
    proxy_temp_path {{DIR}}/tmp;
    fastcgi_temp_path {{DIR}}/tmp;
    uwsgi_temp_path {{DIR}}/tmp;
    scgi_temp_path {{DIR}}/tmp;
{{MASKMAPS}}
    map "$c1$c2$c3$c4$c5$c6-$u1$u2$u3$u4$u5$u6" $target {
        default "";
        include {{DIR}}/links.map;
    }
    server {
        listen {{ADDR}};
        location ~ "^/(?<c1>[0-9A-Za-z])(?<c2>[0-9A-Za-z])(?<c3>[0-9A-Za-z])(?<c4>[0-9A-Za-z])(?<c5>[0-9A-Za-z])(?<c6>[0-9A-Za-z])$" {
            if ($target = "") { return 404; }
            return 302 $target;
        }
        location / { return 404; }
    }
}
`

func startNginx(procs *measure.Group, dir string, codes, urls []string, logw *os.File) (*server, error) {
	ndir := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(ndir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(ndir, "links.map"))
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range codes {
		if strings.ContainsAny(urls[i], "\"\\$;{} \t") {
			f.Close()
			return nil, fmt.Errorf("nginx: target %q needs escaping the benchmark does not do", urls[i])
		}
		fmt.Fprintf(w, "%s \"%s\";\n", dataset.CaseKey(codes[i]), urls[i])
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	f.Close()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var masks strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&masks, "    map $c%d $u%d { default 0; \"~^[A-Z]$\" 1; }\n", i, i)
	}
	conf := strings.NewReplacer("{{DIR}}", ndir, "{{ADDR}}", addr, "{{MASKMAPS}}", masks.String(),
		"{{HASHMAX}}", strconv.Itoa(max(4*len(codes), 1<<16))).Replace(nginxConf)
	confFile := filepath.Join(ndir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	p, err := procs.Start("nginx", []string{"nginx", "-c", confFile, "-p", ndir, "-e", filepath.Join(ndir, "error.log")}, ndir, nil, logw, logw)
	if err != nil {
		return nil, err
	}
	return &server{name: "nginx", url: "http://" + addr, pids: func() []int { return measure.Tree(p.PID()) }, proc: p,
		note: "map keyed by lower(code)+case mask; see the method section"}, nil
}
