package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// paceConfig is one open-loop run: request i is due at start + i/rate and
// goes out on the keep-alive connection idle the longest, so every
// connection (and so every source address) carries its share.
type paceConfig struct {
	addr     string   // host:port, IPv4
	paths    []string // request targets, replayed in order
	rate     int
	duration time.Duration
	conns    int
	// sources, when positive, is how many distinct loopback addresses the
	// connections come from (127.1.x.y, round robin): clients, as the
	// edge's per-client policy tells them apart. Zero: the default source.
	sources int
	timeout time.Duration // a request unanswered this long after it was due is an error
	// answer, if set, judges an answer to paths[i%len(paths)]: it returns
	// false for a wrong one.
	answer func(i, status int, location []byte) bool
	// request, if set, writes request i (appending to dst, which it may
	// reuse) in place of a GET of paths[i%len(paths)]: a POST with a body
	// of its own, say. It runs on the generator's thread when request i
	// is due, so it must be cheap and should not allocate.
	request func(dst []byte, i int) []byte
	// seen, if set, is told of every answer: the request's index, when it
	// was due and when its answer was complete (both from the run's
	// start), its status and its body (de-chunked; valid only during the
	// call).
	seen func(i, status int, due, at time.Duration, body []byte)
}

// paceResult is what a run measured.
type paceResult struct {
	latencies  []time.Duration // from when each answered request was due, sorted
	sent       int
	codes      map[int]int
	wrong      int
	firstWrong int // request index of the first wrong answer, or -1
	firstGot   string
	errors     int // unanswered within the timeout, or a broken connection
	elapsed    time.Duration
	start      time.Time // request 0 was due then
}

// pace is a load generator in the manner of wrk2: one OS thread, an epoll
// loop over raw non-blocking sockets, waking for the next due request with
// epoll_pwait2's nanosecond timeout (a timerfd on kernels before 5.11), so the generator adds tens of microseconds to a latency rather
// than the milliseconds a goroutine-per-request client (vegeta, on one
// shared core) adds under load. Latency is measured from when a request
// was due, not from when it was sent: a server that stalls is charged for
// every request that queued behind the stall (no coordinated omission).
func pace(cfg paceConfig) (res paceResult, err error) {
	res.codes, res.firstWrong = map[int]int{}, -1
	if cfg.rate <= 0 || cfg.conns <= 0 || len(cfg.paths) == 0 && cfg.request == nil {
		return res, errors.New("pace: want a rate, connections and paths or a request builder")
	}
	if cfg.timeout <= 0 {
		cfg.timeout = 5 * time.Second
	}
	ap, err := net.ResolveTCPAddr("tcp4", cfg.addr)
	if err != nil {
		return res, err
	}
	sa := &unix.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())

	// One thread runs the whole loop: the generator's own scheduling must
	// not show up in the latencies.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return res, fmt.Errorf("pace: epoll: %w", err)
	}
	defer unix.Close(epfd)
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return res, fmt.Errorf("pace: timerfd: %w", err)
	}
	defer unix.Close(tfd)
	const timerTag = -1
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, tfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: timerTag}); err != nil {
		return res, fmt.Errorf("pace: epoll add timer: %w", err)
	}

	type conn struct {
		fd   int
		buf  []byte
		req  int // index of the request in flight, -1 when idle
		due  time.Duration
		dead bool
	}
	conns := make([]*conn, cfg.conns)
	idle := make([]int, 0, cfg.conns)
	for i := range conns {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return res, fmt.Errorf("pace: socket: %w", err)
		}
		defer unix.Close(fd)
		if cfg.sources > 0 {
			j := i % cfg.sources
			src := &unix.SockaddrInet4{Addr: [4]byte{127, byte(1 + j>>16), byte(j >> 8), byte(j)}}
			if err := unix.Bind(fd, src); err != nil {
				return res, fmt.Errorf("pace: bind %v: %w", src.Addr, err)
			}
		}
		if err := unix.Connect(fd, sa); err != nil {
			return res, fmt.Errorf("pace: connect %s: %w", cfg.addr, err)
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		if err := unix.SetNonblock(fd, true); err != nil {
			return res, err
		}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}); err != nil {
			return res, fmt.Errorf("pace: epoll add: %w", err)
		}
		conns[i] = &conn{fd: fd, buf: make([]byte, 0, 16<<10), req: -1}
		idle = append(idle, i)
	}

	total := int(float64(cfg.rate) * cfg.duration.Seconds())
	interval := float64(time.Second) / float64(cfg.rate)
	dueAt := func(i int) time.Duration { return time.Duration(float64(i) * interval) }
	res.latencies = make([]time.Duration, 0, total)
	reqs := make([][]byte, len(cfg.paths))
	for i, p := range cfg.paths {
		reqs[i] = []byte("GET " + p + " HTTP/1.1\r\nHost: " + cfg.addr + "\r\n\r\n")
	}
	events := make([]unix.EpollEvent, cfg.conns+1)
	var rbuf [16 << 10]byte
	var built, body []byte // the request cfg.request wrote; a de-chunked body
	inflight := 0
	pwait2 := true
	start := time.Now()
	res.start = start
	fail := func(c *conn) {
		if c.req >= 0 {
			res.errors++
			inflight--
		}
		c.req, c.dead = -1, true
		_ = unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
	for {
		now := time.Since(start)
		for res.sent < total && dueAt(res.sent) <= now && len(idle) > 0 {
			// The longest idle first: with one connection per client,
			// each client sends its share, as real ones do, rather than
			// the few most recently answered carrying all the load.
			ci := idle[0]
			idle = idle[:copy(idle, idle[1:])]
			c := conns[ci]
			if c.dead {
				continue // closed by the server while idle
			}
			var r []byte
			if cfg.request != nil {
				built = cfg.request(built[:0], res.sent)
				r = built
			} else {
				r = reqs[res.sent%len(reqs)]
			}
			if n, err := unix.Write(c.fd, r); err != nil || n != len(r) {
				res.sent++ // counted as sent and failed
				res.errors++
				fail(c)
				continue
			}
			c.req, c.due = res.sent, dueAt(res.sent)
			res.sent++
			inflight++
		}
		if res.sent == total && inflight == 0 {
			break
		}
		if now > cfg.duration+cfg.timeout {
			// Whatever is still unanswered, or never went out for lack of
			// a live connection, failed.
			res.errors += inflight + (total - res.sent)
			break
		}
		// Wait for answers, or until the next request is due if a
		// connection is free to take it (at most 100 ms: all busy).
		wait := 100 * time.Millisecond
		if res.sent < total && len(idle) > 0 {
			if wait = dueAt(res.sent) - time.Since(start); wait <= 0 {
				continue
			}
		}
		var n int
		if pwait2 {
			// One system call with a nanosecond timeout (Linux 5.11).
			ts := unix.NsecToTimespec(int64(wait))
			r, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)),
				uintptr(unsafe.Pointer(&ts)), 0, 0)
			n, err = int(r), nil
			if e != 0 {
				n, err = -1, e
			}
			if e == unix.ENOSYS {
				pwait2 = false
				continue
			}
		} else {
			spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(wait))}
			if err := unix.TimerfdSettime(tfd, 0, &spec, nil); err != nil {
				return res, fmt.Errorf("pace: arm timer: %w", err)
			}
			n, err = unix.EpollWait(epfd, events, -1)
		}
		if err != nil && err != unix.EINTR {
			return res, fmt.Errorf("pace: epoll wait: %w", err)
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == timerTag {
				var b [8]byte
				_, _ = unix.Read(tfd, b[:])
				continue
			}
			c := conns[ev.Fd]
			if c.dead {
				continue
			}
			for {
				m, err := unix.Read(c.fd, rbuf[:])
				if err == unix.EAGAIN {
					break
				}
				if err != nil || m == 0 {
					fail(c)
					break
				}
				c.buf = append(c.buf, rbuf[:m]...)
				for c.req >= 0 {
					status, loc, size, ok := parseAnswer(c.buf)
					if !ok {
						break
					}
					at := time.Since(start)
					res.latencies = append(res.latencies, at-c.due)
					if cfg.seen != nil {
						body = answerBody(body[:0], c.buf[:size])
						cfg.seen(c.req, status, c.due, at, body)
					}
					res.codes[status]++
					if cfg.answer != nil && !cfg.answer(c.req, status, loc) {
						res.wrong++
						if res.firstWrong < 0 {
							res.firstWrong, res.firstGot = c.req, fmt.Sprintf("%d %q", status, loc)
						}
					}
					c.buf = c.buf[:copy(c.buf, c.buf[size:])]
					c.req = -1
					inflight--
					idle = append(idle, int(ev.Fd))
				}
				if m < len(rbuf) {
					break
				}
			}
		}
	}
	res.elapsed = time.Since(start)
	slices.Sort(res.latencies)
	return res, nil
}

var (
	headerEnd = []byte("\r\n\r\n")
	crlf      = []byte("\r\n")
)

// parseAnswer reads one HTTP/1.1 answer from the start of b: its status,
// Location value and total size, its body framed by Content-Length or
// chunked. ok is false until it is complete (and for a malformed one). It
// does not allocate: the generator's garbage collections would show up as
// latency.
func parseAnswer(b []byte) (status int, location []byte, size int, ok bool) {
	end := bytes.Index(b, headerEnd)
	if end < 12 {
		return 0, nil, 0, false
	}
	for _, d := range b[9:12] {
		if d < '0' || d > '9' {
			return 0, nil, 0, false
		}
		status = status*10 + int(d-'0')
	}
	body, chunked := 0, false
	rest := b[:end+2]
	for {
		i := bytes.Index(rest, crlf)
		if i < 0 {
			break
		}
		line := rest[:i]
		rest = rest[i+2:]
		k, v, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		switch {
		case bytes.EqualFold(k, []byte("Location")):
			location = bytes.TrimSpace(v)
		case bytes.EqualFold(k, []byte("Content-Length")):
			body = 0
			for _, d := range bytes.TrimSpace(v) {
				if d < '0' || d > '9' {
					return 0, nil, 0, false
				}
				body = body*10 + int(d-'0')
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(bytes.TrimSpace(v), []byte("chunked"))
		}
	}
	start := end + len(headerEnd)
	if chunked {
		n, ok := dechunk(nil, b[start:])
		if !ok {
			return 0, nil, 0, false
		}
		return status, location, start + n, true
	}
	size = start + body
	if len(b) < size {
		return 0, nil, 0, false
	}
	return status, location, size, true
}

// answerBody appends the body of answer (one complete answer, as
// parseAnswer framed it) to dst, de-chunked. It always copies: the caller
// reuses dst, which must never alias the connection's buffer it reads.
func answerBody(dst, answer []byte) []byte {
	end := bytes.Index(answer, headerEnd)
	if end < 0 {
		return dst
	}
	head, body := answer[:end+2], answer[end+len(headerEnd):]
	for {
		i := bytes.Index(head, crlf)
		if i < 0 {
			return append(dst, body...)
		}
		k, v, found := bytes.Cut(head[:i], []byte(":"))
		head = head[i+2:]
		if found && bytes.EqualFold(k, []byte("Transfer-Encoding")) && bytes.EqualFold(bytes.TrimSpace(v), []byte("chunked")) {
			out := dst
			if _, ok := dechunk(&out, body); !ok {
				return dst
			}
			return out
		}
	}
}

// dechunk walks a chunked body at the start of b and returns its framed
// size (trailers included); ok is false until it is complete or when it is
// malformed. With out set, the chunks' data are appended to *out.
func dechunk(out *[]byte, b []byte) (size int, ok bool) {
	pos := 0
	for {
		i := bytes.Index(b[pos:], crlf)
		if i < 0 {
			return 0, false
		}
		line := b[pos : pos+i]
		if j := bytes.IndexByte(line, ';'); j >= 0 {
			line = line[:j] // a chunk extension
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || len(line) > 15 {
			return 0, false
		}
		n := 0
		for _, d := range line {
			switch {
			case d >= '0' && d <= '9':
				n = n<<4 | int(d-'0')
			case d >= 'a' && d <= 'f':
				n = n<<4 | int(d-'a'+10)
			case d >= 'A' && d <= 'F':
				n = n<<4 | int(d-'A'+10)
			default:
				return 0, false
			}
		}
		pos += i + 2
		if n == 0 {
			// The last chunk, then trailer fields up to an empty line.
			if bytes.HasPrefix(b[pos:], crlf) {
				return pos + 2, true
			}
			j := bytes.Index(b[pos:], headerEnd)
			if j < 0 {
				return 0, false
			}
			return pos + j + len(headerEnd), true
		}
		if len(b) < pos+n+2 {
			return 0, false
		}
		if !bytes.Equal(b[pos+n:pos+n+2], crlf) {
			return 0, false
		}
		if out != nil {
			*out = append(*out, b[pos:pos+n]...)
		}
		pos += n + 2
	}
}
