package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/scrape"
)

// Client is a creator of one tenant (Key) on a control API and a visitor
// of an edge. The zero HTTP fields take clients that never follow
// redirects: what the edge answered is what is seen. A Client is safe for
// concurrent use.
type Client struct {
	ControlURL, EdgeURL, Key string
}

// apiTimeout is far above any server-side bound (a shared create
// transaction is bounded at 10s): a create that hangs shows up as a client
// timeout, not as a slow success. followTimeout bounds one edge request.
const (
	apiTimeout    = 2 * time.Minute
	followTimeout = 30 * time.Second
)

func noFollow(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Answer is an HTTP response read whole, or the transport error that left
// none.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
}

func (a Answer) String() string {
	if a.Err != nil {
		return a.Err.Error()
	}
	return fmt.Sprintf("%d %s", a.Status, bytes.TrimSpace(a.Body))
}

// Do sends a request to control (path is below ControlURL) with the
// client's key when it has one, a JSON body when body is not empty, and
// extra header pairs (name, value, …).
func (c Client) Do(ctx context.Context, method, path, body string, headers ...string) Answer {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.ControlURL+path, rd)
	if err != nil {
		return Answer{Err: err}
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := noFollow(apiTimeout).Do(req)
	if err != nil {
		return Answer{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b, Err: err}
}

// Link is a create request's body.
type Link struct {
	URL  string `json:"url"`
	Code string `json:"code,omitempty"` // a custom code; empty takes a generated one
	// Domain is the host of one of the tenant's domains; empty is the
	// platform's.
	Domain string `json:"domain,omitempty"`
}

// Created is one create's answer.
type Created struct {
	Status     int
	Code       string // on 201
	URL        string // the normalized target control stored, on 201
	Version    uint64 // the link's change version, on 201
	Body       map[string]any
	Problem    map[string]any // the body of any other answer
	RetryAfter string
	Err        error // transport error: no answer at all
}

// Create posts one link, with extra header pairs (an Idempotency-Key).
func (c Client) Create(ctx context.Context, l Link, headers ...string) Created {
	b, _ := json.Marshal(l)
	return c.CreateJSON(ctx, string(b), headers...)
}

// CreateJSON posts body as it is (malformed ones included).
func (c Client) CreateJSON(ctx context.Context, body string, headers ...string) Created {
	a := c.Do(ctx, "POST", "/api/v1/links", body, headers...)
	if a.Err != nil {
		return Created{Err: a.Err}
	}
	out := Created{Status: a.Status, RetryAfter: a.Header.Get("Retry-After")}
	_ = json.Unmarshal(a.Body, &out.Body)
	if a.Status != http.StatusCreated {
		out.Problem = out.Body
		return out
	}
	var v struct {
		Code    string `json:"code"`
		URL     string `json:"url"`
		Version uint64 `json:"version"`
	}
	_ = json.Unmarshal(a.Body, &v)
	out.Code, out.URL, out.Version = v.Code, v.URL, v.Version
	return out
}

// patience bounds waiting out the tenant's rate limit; limitedEvery is how
// often a limited client asks again (the limit refills over seconds).
const (
	patience     = time.Minute
	limitedEvery = 50 * time.Millisecond
)

// CreatePatiently is Create that waits out the tenant's rate limit (429),
// within a minute.
func (c Client) CreatePatiently(ctx context.Context, l Link, headers ...string) Created {
	b, _ := json.Marshal(l)
	return c.patiently(ctx, func() Created { return c.CreateJSON(ctx, string(b), headers...) })
}

// CreateJSONPatiently is CreateJSON that waits out the rate limit.
func (c Client) CreateJSONPatiently(ctx context.Context, body string, headers ...string) Created {
	return c.patiently(ctx, func() Created { return c.CreateJSON(ctx, body, headers...) })
}

func (c Client) patiently(ctx context.Context, create func() Created) Created {
	var r Created
	_ = poll.WaitEvery(ctx, "create within the rate limit", patience, limitedEvery, func() bool {
		r = create()
		return r.Err != nil || r.Status != http.StatusTooManyRequests
	})
	return r
}

// CreateBatch posts a batch (POST /api/v1/links/batch, body as it is),
// waiting out the rate limit, and returns how many links it created.
func (c Client) CreateBatch(ctx context.Context, body []byte) (int, error) {
	var a Answer
	_ = poll.WaitEvery(ctx, "batch within the rate limit", patience, limitedEvery, func() bool {
		a = c.Do(ctx, "POST", "/api/v1/links/batch", string(body))
		return a.Err != nil || a.Status != http.StatusTooManyRequests
	})
	if a.Err != nil {
		return 0, a.Err
	}
	if a.Status != http.StatusOK {
		return 0, fmt.Errorf("batch: %d: %.300s", a.Status, a.Body)
	}
	var out struct {
		Created int `json:"created"`
	}
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return 0, fmt.Errorf("batch answer: %w", err)
	}
	return out.Created, nil
}

// Follow asks the edge for code once, following no redirect, and returns
// the status and Location.
func (c Client) Follow(code string) (status int, location string, err error) {
	return Follow(c.EdgeURL, code)
}

// Follow asks the edge at edgeURL for code once, following no redirect.
func Follow(edgeURL, code string) (status int, location string, err error) {
	resp, err := noFollow(followTimeout).Get(edgeURL + "/" + code)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// Get asks url once, following no redirect, and returns the status and up
// to 64 KiB of the body.
func Get(url string) (int, string, error) {
	resp, err := noFollow(followTimeout).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), err
}

// Metrics scrapes control's metrics at controlURL/metrics.
func Metrics(controlURL string) (map[string]*dto.MetricFamily, error) {
	return scrape.Scrape(controlURL + "/metrics")
}

// EdgeMetrics scrapes an edge's metrics, at edgeURL/-/metrics: the edge's
// own paths are under /-/, where no code can be.
func EdgeMetrics(edgeURL string) (map[string]*dto.MetricFamily, error) {
	return scrape.Scrape(edgeURL + "/-/metrics")
}

// FollowUntil asks the edge at edgeURL for code until done holds for its
// answer or within passes, and returns the last answer: the caller checks
// it, so a timeout fails with what the edge last said.
func FollowUntil(edgeURL, code string, within time.Duration, done func(status int, location string) bool) (status int, location string, err error) {
	_ = Poll(context.Background(), "follow", within, func() bool {
		status, location, err = Follow(edgeURL, code)
		return err == nil && done(status, location)
	})
	return status, location, err
}
