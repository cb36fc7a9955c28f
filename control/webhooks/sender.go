package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Sender makes webhook POSTs: short timeouts, no redirects followed, no
// proxy from the environment, connections only to addresses its policy
// allows, and at most MaxResponse bytes of an answer read. Safe for
// concurrent use.
type Sender struct {
	client      *http.Client
	maxResponse int64
}

// SenderConfig tunes a Sender; zero values take the defaults.
type SenderConfig struct {
	Policy TargetPolicy
	// Timeout bounds an attempt, connection to last byte (default 10s);
	// an endpoint should answer 2xx at once and do its work later.
	Timeout time.Duration
	// MaxResponse is how much of an answer is read (default 64 KiB); the
	// rest is dropped with the connection.
	MaxResponse int64
	// UserAgent is sent with every attempt (default edgelink-webhooks/1).
	UserAgent string
}

// NewSender returns a Sender.
func NewSender(cfg SenderConfig) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxResponse <= 0 {
		cfg.MaxResponse = 64 << 10
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "edgelink-webhooks/1"
	}
	dialer := &net.Dialer{Timeout: min(cfg.Timeout, 5*time.Second), Control: cfg.Policy.control}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would connect for us, past the address check
		DialContext:            dialer.DialContext,
		TLSHandshakeTimeout:    min(cfg.Timeout, 5*time.Second),
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 16 << 10,
		ForceAttemptHTTP2:      true,
	}
	ua := cfg.UserAgent
	return &Sender{
		client: &http.Client{
			Transport: userAgent{tr, ua},
			Timeout:   cfg.Timeout,
			// A redirect is an answer, not a destination: following it
			// would send the event somewhere the tenant never named.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		maxResponse: cfg.MaxResponse,
	}
}

type userAgent struct {
	rt http.RoundTripper
	ua string
}

func (u userAgent) RoundTrip(r *http.Request) (*http.Response, error) {
	r.Header.Set("User-Agent", u.ua)
	return u.rt.RoundTrip(r)
}

// Result is what one attempt came to.
type Result struct {
	StatusCode int // 0: no answer
	Latency    time.Duration
	// Err says why the attempt failed (no answer, or a status other than
	// 2xx); empty on success.
	Err string
	// Body is the start of the answer (at most 1 KiB, valid UTF-8).
	Body string
}

// OK reports whether the endpoint took the event: a 2xx answer.
func (r Result) OK() bool { return r.StatusCode >= 200 && r.StatusCode < 300 }

// Post sends body to url as event id, signed at now with keys.
func (s *Sender) Post(ctx context.Context, url, id string, now time.Time, body []byte, keys [][]byte) Result {
	ts := now.Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{Err: "bad request: " + err.Error()}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", SignatureHeader(keys, id, ts, body))
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return Result{Latency: time.Since(start), Err: transportError(err)}
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	// Read a little more so the connection can be reused; past
	// maxResponse it is dropped.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, s.maxResponse-int64(len(head))))
	r := Result{StatusCode: resp.StatusCode, Latency: time.Since(start), Body: cleanUTF8(head)}
	switch {
	case r.OK():
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		r.Err = fmt.Sprintf("answered %d: redirects are not followed; register the final URL", resp.StatusCode)
	default:
		r.Err = fmt.Sprintf("answered %d", resp.StatusCode)
	}
	return r
}

// transportError says why no answer came, without Go's wrapping.
func transportError(err error) string {
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		return refused.Error()
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return "timed out"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return limit(op.Error(), 512)
	}
	return limit(err.Error(), 512)
}

func limit(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// cleanUTF8 is b as text for the log: invalid UTF-8 and NULs replaced.
func cleanUTF8(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	for len(s) > 0 && utf8.RuneCountInString(s) > 1024 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}
