package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/control/webhooks/pgstore"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// seqIDs hands out 1, 2, 3, … in each domain's range.
type seqIDs struct{ n *atomic.Uint64 }

func (s seqIDs) NextID(_ context.Context, d link.DomainID) (uint64, error) {
	return link.IDBase(d) + s.n.Add(1), nil
}
func (seqIDs) Done(uint64, bool) {}

// rig is webhooks on a real PostgreSQL and NATS JetStream: the link write
// path, the store, the publisher and the dispatcher, with a clock tests
// may move.
type rig struct {
	t      *testing.T
	pool   *pgxpool.Pool
	st     *postgres.Store
	links  *links.Service
	whs    *pgstore.Store
	nats   *natstest.Server
	js     jetstream.JetStream
	svc    *webhooks.Service
	tenant int64
	clock  *clock
	short  links.ShortURLs
	// running dispatcher and publisher, if started
	stop func()
	disp *webhooks.Dispatcher
	conn *nats.Conn // the last started instance's
}

// clock is a time tests set; zero follows the wall clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		return time.Now()
	}
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testSchedule retries at once (1 ms, then a few ms): tests of delivery
// want every retry now; the schedule's arithmetic has its own test.
var testSchedule = webhooks.Schedule{Delays: []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond,
	8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond, 64 * time.Millisecond}}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	if _, err := st.EnsureDefaultDomain(ctx, "sho.rt"); err != nil {
		t.Fatal(err)
	}
	tenant, _, err := st.CreateTenantWithKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	short, err := links.NewShortURLs("https://sho.rt")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, pool: pool, st: st, whs: pgstore.New(pool), nats: srv, js: js, tenant: tenant, clock: &clock{}, short: short,
		links: links.New(st, seqIDs{new(atomic.Uint64)}, links.Config{})}
	if err := webhooks.EnsureStream(ctx, js, webhooks.StreamConfig(time.Hour, 64<<20, time.Minute, 1)); err != nil {
		t.Fatal(err)
	}
	r.svc = webhooks.NewService(r.whs, js, webhooks.ServiceConfig{
		Policy: webhooks.TargetPolicy{AllowHTTP: true, AllowPrivate: true}, Now: r.clock.Now,
		Changed: func() {
			if r.disp != nil {
				r.disp.Changed()
			}
		}})
	return r
}

// start runs a publisher and a dispatcher (with cfg's changes) on their
// own NATS connection until the returned stop, or the test's end.
func (r *rig) start(senderTimeout time.Duration, change func(*webhooks.DispatcherConfig)) (stop func()) {
	r.t.Helper()
	nc, js := r.nats.Connect(r.t)
	r.conn = nc
	cfg := webhooks.DispatcherConfig{Schedule: testSchedule, Reconcile: 50 * time.Millisecond, AckWait: 5 * time.Second,
		Stream: webhooks.StreamConfig(time.Hour, 64<<20, time.Minute, 1), Now: r.clock.Now, Rand: func() float64 { return 0.5 }}
	if change != nil {
		change(&cfg)
	}
	d := webhooks.NewDispatcher(r.whs, js, webhooks.NewSender(webhooks.SenderConfig{Timeout: senderTimeout,
		Policy: webhooks.TargetPolicy{AllowHTTP: true, AllowPrivate: true}}), cfg)
	p := webhooks.NewPublisher(r.whs, js, webhooks.Renderer{Short: r.short}, webhooks.PublisherConfig{Poll: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { d.Run(ctx) })
	wg.Go(func() { p.Run(ctx) })
	r.disp = d
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	r.t.Cleanup(stop)
	return stop
}

// endpoint registers url for types and returns its id and secret.
func (r *rig) endpoint(url string, types ...webhooks.EventType) (string, []byte) {
	r.t.Helper()
	ts := make([]string, len(types))
	for i, t := range types {
		ts[i] = string(t)
	}
	e, key, err := r.svc.Create(context.Background(), r.tenant, webhooks.Input{URL: url, EventTypes: ts})
	if err != nil {
		r.t.Fatal(err)
	}
	return e.ID, key
}

func (r *rig) create(url string, tags ...string) *links.Link {
	r.t.Helper()
	c, err := r.links.Create(context.Background(), r.tenant, links.CreateRequest{URL: url, Tags: tags})
	if err != nil {
		r.t.Fatal(err)
	}
	return c.Link
}

// received is one request a receiver took.
type received struct {
	id, typ     string
	body        []byte
	ts          int64
	signatures  []string
	status      int
	tenant      int64
	linkVersion uint64
}

// receiver is a webhook endpoint on loopback that records every request
// and answers what answer says.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(id string, n int) int // n: how many times this id came before; 0 hangs until the client gives up or release
	seen   map[string]int
	// release, closed, answers 200 to the requests hanging then.
	release chan struct{}
}

func newReceiver(t *testing.T, answer func(id string, n int) int) *receiver {
	rc := &receiver{answer: answer, seen: map[string]int{}, release: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := r.Header.Get("webhook-id")
	ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	var ev struct {
		Type     string `json:"type"`
		TenantID int64  `json:"tenant_id"`
		Data     struct {
			Version uint64 `json:"version"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	rc.mu.Lock()
	n := rc.seen[id]
	rc.seen[id]++
	status := rc.answer(id, n)
	i := len(rc.got)
	rc.got = append(rc.got, received{id: id, typ: ev.Type, body: body, ts: ts, status: status, tenant: ev.TenantID,
		signatures: strings.Fields(r.Header.Get("webhook-signature")), linkVersion: ev.Data.Version})
	rc.mu.Unlock()
	if status == 0 {
		select {
		case <-r.Context().Done(): // the sender gave up
			return
		case <-rc.release:
		}
		if r.Context().Err() != nil {
			return
		}
		status = 200
		rc.mu.Lock()
		rc.got[i].status = status
		rc.mu.Unlock()
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// delivered are the requests answered 2xx, by event id.
func (rc *receiver) delivered() map[string][]received {
	out := map[string][]received{}
	for _, g := range rc.requests() {
		if g.status >= 200 && g.status < 300 {
			out[g.id] = append(out[g.id], g)
		}
	}
	return out
}

// verify is the receiver's check of a webhook, written from docs/webhooks.md
// as a receiver would write it, not with the package's signer: some
// v1 signature in the header is the HMAC-SHA256 under secret of
// "id.timestamp.body".
func verify(secret []byte, id string, ts int64, body []byte, signatures []string) error {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range signatures {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature verifies")
}
