package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/shared/base62"
)

// created is one link whose create answered 201.
type created struct {
	code, url string
	id        uint64
	at        time.Time
}

// failure is one create that did not answer 201.
type failure struct {
	at     time.Time
	status string // the HTTP status, or "transport"
	detail string
}

// load creates links through the controls' API and follows them on the
// edges, checking every answer. Its methods are safe for concurrent use.
type load struct {
	keys     []string        // one API key (tenant) per create worker
	controls func() []string // live control URLs
	edges    func() []string // edge URLs
	client   *http.Client

	mu       sync.Mutex
	links    []created
	failures []failure
	wrong    []string // the first wrong answers, for the failure message
	unavail  map[string]int64

	wrongN                 atomic.Int64
	redirects, redirectsOK atomic.Int64
	// jumps are the follows right after each 201: at once (302 on the
	// first ask), after retrying retryable answers, or never within the
	// bound (the final check still asks again).
	jumpsAtOnce, jumpsRetried, jumpsGaveUp atomic.Int64
}

func newLoad(keys []string, controls, edges func() []string) *load {
	return &load{
		keys: keys, controls: controls, edges: edges, unavail: map[string]int64{},
		client: &http.Client{
			Timeout:       15 * time.Second,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// run starts creators (one per key, each at perWorker creates per second)
// and redirectors (each at redirectRate per second) until ctx ends; the
// returned function waits for them.
func (l *load) run(ctx context.Context, perWorker float64, redirectors int, redirectRate float64) (wait func()) {
	var wg sync.WaitGroup
	for w := range l.keys {
		wg.Go(func() { l.creator(ctx, w, perWorker) })
	}
	for r := range redirectors {
		wg.Go(func() { l.redirector(ctx, r, redirectRate) })
	}
	return wg.Wait
}

// paced calls do with 0, 1, 2, … at rate calls a second until ctx ends.
func paced(ctx context.Context, rate float64, do func(n int)) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		do(n)
	}
}

func (l *load) creator(ctx context.Context, w int, rate float64) {
	paced(ctx, rate, func(n int) {
		controls := l.controls()
		if len(controls) == 0 {
			l.fail(failure{at: time.Now(), status: "no control"})
			return
		}
		target := fmt.Sprintf("https://example.com/gate/%d/%d?src=load", w, n)
		c, f, ok := l.create(ctx, controls[n%len(controls)], l.keys[w], target)
		if !ok {
			if ctx.Err() == nil {
				l.fail(f)
			}
			return
		}
		l.mu.Lock()
		l.links = append(l.links, c)
		l.mu.Unlock()
		edges := l.edges()
		l.jump(ctx, edges[n%len(edges)], c)
	})
}

func (l *load) fail(f failure) {
	l.mu.Lock()
	l.failures = append(l.failures, f)
	l.mu.Unlock()
}

// create posts one link. A 201 must carry a 6-character code and the
// target as sent (these targets are already in normal form).
func (l *load) create(ctx context.Context, controlURL, key, target string) (created, failure, bool) {
	body := fmt.Sprintf(`{"url": %q}`, target)
	req, _ := http.NewRequestWithContext(ctx, "POST", controlURL+"/api/v1/links", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	now := time.Now()
	if err != nil {
		return created{}, failure{at: now, status: "transport", detail: err.Error()}, false
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return created{}, failure{at: now, status: fmt.Sprint(resp.StatusCode), detail: string(b)}, false
	}
	var out struct{ Code, URL string }
	if err := json.Unmarshal(b, &out); err != nil {
		l.wrongAnswer("create %s: 201 with an unreadable body %q", target, b)
		return created{}, failure{}, false
	}
	id, err := base62.Decode(out.Code)
	if err != nil || len(out.Code) != 6 || out.URL != target {
		l.wrongAnswer("create %s: 201 with code %q url %q", target, out.Code, out.URL)
		return created{}, failure{}, false
	}
	return created{code: out.Code, url: out.URL, id: id, at: now}, failure{}, true
}

func (l *load) wrongAnswer(format string, args ...any) {
	l.wrongN.Add(1)
	l.mu.Lock()
	if len(l.wrong) < 20 {
		l.wrong = append(l.wrong, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// answer is what an edge said about a link.
type answer int

const (
	answerOK answer = iota
	// answerRetry is a retryable answer: 503 (the authority cannot be
	// asked), 429, or no connection (the edge is restarting).
	answerRetry
	answerWrong
)

// follow asks edgeURL for c once and classifies the answer. Anything but a
// 302 to c's target or a retryable answer is wrong: a 201 link must never
// be a 404 or 410, nor lead elsewhere.
func (l *load) follow(ctx context.Context, edgeURL string, c created) (answer, string) {
	req, _ := http.NewRequestWithContext(ctx, "GET", edgeURL+"/"+c.code, nil)
	resp, err := l.client.Do(req)
	if err != nil {
		return answerRetry, "transport"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusFound && resp.Header.Get("Location") == c.url:
		return answerOK, ""
	case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests:
		return answerRetry, fmt.Sprint(resp.StatusCode)
	default:
		return answerWrong, fmt.Sprintf("GET %s/%s (created %s): %d Location %q; want 302 %q",
			edgeURL, c.code, c.at.Format(time.TimeOnly), resp.StatusCode, resp.Header.Get("Location"), c.url)
	}
}

// jump follows a link right after its 201, retrying retryable answers for
// a while.
func (l *load) jump(ctx context.Context, edgeURL string, c created) {
	deadline := time.Now().Add(20 * time.Second)
	for try := 0; ; try++ {
		a, why := l.follow(ctx, edgeURL, c)
		switch {
		case ctx.Err() != nil:
			return
		case a == answerOK && try == 0:
			l.jumpsAtOnce.Add(1)
			return
		case a == answerOK:
			l.jumpsRetried.Add(1)
			return
		case a == answerWrong:
			l.wrongAnswer("right after its 201: %s", why)
			return
		case time.Now().After(deadline):
			l.jumpsGaveUp.Add(1)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redirector follows links created so far, the newest the hottest (Zipf
// over age), on every edge in turn.
func (l *load) redirector(ctx context.Context, r int, rate float64) {
	rng := rand.New(rand.NewPCG(uint64(r), 42))
	paced(ctx, rate, func(i int) {
		l.mu.Lock()
		n := len(l.links)
		var c created
		if n > 0 {
			age := uint64(0)
			if n > 1 {
				age = rand.NewZipf(rng, 1.1, 1, uint64(n-1)).Uint64()
			}
			c = l.links[n-1-int(age)]
		}
		l.mu.Unlock()
		if n == 0 {
			return
		}
		edges := l.edges()
		edgeURL := edges[(r+i)%len(edges)]
		a, why := l.follow(ctx, edgeURL, c)
		if ctx.Err() != nil {
			return
		}
		l.redirects.Add(1)
		switch a {
		case answerOK:
			l.redirectsOK.Add(1)
		case answerRetry:
			l.mu.Lock()
			l.unavail[why]++
			l.mu.Unlock()
		case answerWrong:
			l.wrongAnswer("%s", why)
		}
	})
}

// snapshot returns every 201 so far and every failure so far.
func (l *load) snapshot() ([]created, []failure) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.links), slices.Clone(l.failures)
}

// failureCounts groups failures by status.
func failureCounts(fs []failure) map[string]int {
	m := map[string]int{}
	for _, f := range fs {
		m[f.status]++
	}
	return m
}

// sample gives up to n failures' details, one of each status first.
func sample(fs []failure, n int) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range fs {
		if !seen[f.status] && len(out) < n {
			seen[f.status] = true
			out = append(out, fmt.Sprintf("%s at %s: %.200s", f.status, f.at.Format("15:04:05.000"), f.detail))
		}
	}
	return out
}

// summary is the load's figures in one line.
func (l *load) summary() string {
	links, fails := l.snapshot()
	l.mu.Lock()
	unavail := fmt.Sprint(l.unavail)
	l.mu.Unlock()
	return fmt.Sprintf("creates: %d answered 201, %d failed %v; jumps right after 201: %d at once, %d after retrying 503/429/no connection, %d still unavailable after 20s; "+
		"redirects checked: %d (%d 302 to the right target, retryable %s); wrong answers: %d",
		len(links), len(fails), failureCounts(fails), l.jumpsAtOnce.Load(), l.jumpsRetried.Load(), l.jumpsGaveUp.Load(),
		l.redirects.Load(), l.redirectsOK.Load(), unavail, l.wrongN.Load())
}

// checkNoWrong fails the test with the first wrong answers seen.
func (l *load) checkNoWrong(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.wrongN.Load(); n > 0 {
		t.Errorf("%d wrong answers; the first:\n%s", n, strings.Join(l.wrong, "\n"))
	}
}

// verifyEverywhere follows every 201 link on every edge until it answers
// 302 to its target (retryable answers are asked again, within a bound)
// and returns how many answers were checked.
func (l *load) verifyEverywhere(t testing.TB, links []created, edges []string) int64 {
	t.Helper()
	ctx := context.Background()
	var checked, missing atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(links)*len(edges) {
					return
				}
				c, e := links[i/len(edges)], edges[i%len(edges)]
				deadline := time.Now().Add(time.Minute)
				for {
					a, why := l.follow(ctx, e, c)
					if a == answerOK {
						checked.Add(1)
						break
					}
					if a == answerWrong {
						l.wrongAnswer("final check: %s", why)
						break
					}
					if time.Now().After(deadline) {
						missing.Add(1)
						t.Errorf("final check: %s/%s still answers %s after 1m", e, c.code, why)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	l.checkNoWrong(t)
	if m := missing.Load(); m > 0 {
		t.Errorf("%d link×edge answers never became a 302", m)
	}
	return checked.Load()
}

// idReport checks the IDs behind every 201: pairwise distinct, inside the
// 6-character space, and each inside an audited allocation interval.
type idReport struct {
	ids, duplicates, outsideSpace, outsideAudit int
	min, max                                    uint64
}

func checkIDs(links []created, audit []allocstore.Interval) idReport {
	var r idReport
	seen := make(map[uint64]string, len(links))
	ivs := slices.Clone(audit)
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].Start < ivs[j].Start })
	for _, c := range links {
		r.ids++
		if _, dup := seen[c.id]; dup {
			r.duplicates++
		}
		seen[c.id] = c.code
		if c.id < base62.MinID || c.id >= base62.Space {
			r.outsideSpace++
		}
		k := sort.Search(len(ivs), func(i int) bool { return ivs[i].Start > c.id }) - 1
		if k < 0 || c.id >= ivs[k].End {
			r.outsideAudit++
		}
		if r.min == 0 || c.id < r.min {
			r.min = c.id
		}
		r.max = max(r.max, c.id)
	}
	return r
}

func (r idReport) ok() bool { return r.duplicates == 0 && r.outsideSpace == 0 && r.outsideAudit == 0 }

func (r idReport) String() string {
	return fmt.Sprintf("%d IDs from 201s in [%d, %d]: %d duplicates, %d outside [1, 62^6), %d outside every audited interval",
		r.ids, r.min, r.max, r.duplicates, r.outsideSpace, r.outsideAudit)
}
