// Package apiclient is a small client of control's creator API
// (/api/v1/links…), for the CLI and the importer. Errors the API answers are
// *Problem values carrying its problem+json detail; requests that are safe
// to repeat (reads, PATCH, creates with an Idempotency-Key) are retried on
// 429, 503 and transport errors, honoring Retry-After.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/apiwire"
)

// Client talks to one control API with one API key. It is safe for
// concurrent use.
type Client struct {
	base string
	key  string
	// domain is the host whose links the link calls address (WithDomain);
	// "" for the platform's domain.
	domain string
	http   *http.Client
	// Attempts bounds how often a repeatable request is sent (default 8).
	Attempts int
	// MaxBackoff caps the wait between attempts (default 5s).
	MaxBackoff time.Duration
}

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:8080)
// authenticating with key.
func New(baseURL, key string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api url %q: want http(s)://host[:port]", baseURL)
	}
	if key == "" {
		return nil, errors.New("no API key: pass --api-key or set EDGELINK_API_KEY")
	}
	return &Client{
		base: strings.TrimRight(baseURL, "/"), key: key,
		http:     &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Attempts: 8, MaxBackoff: 5 * time.Second,
	}, nil
}

// WithDomain returns a client whose link calls (Create without a domain of
// its own, Get, Patch, Delete, QR, TagLinks and List) address the links on
// the domain with host: codes are unique per domain only. "" is the
// platform's domain, as for c itself. The two clients share their
// connections.
func (c *Client) WithDomain(host string) *Client {
	d := *c
	d.domain = host
	return &d
}

// linkPath is the path of code's link on c's domain, with suffix (such as
// "/qr") after the code and query's parameters.
func (c *Client) linkPath(code, suffix string, query url.Values) string {
	path := "/api/v1/links/" + url.PathEscape(code) + suffix
	if c.domain != "" {
		if query == nil {
			query = url.Values{}
		}
		query.Set("domain", c.domain)
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return path
}

// Problem is an RFC 9457 problem the API answered (or, for a body that is
// not one, the status and the start of the body).
type Problem = apiwire.Problem

// StatusOf is err's HTTP status when it is a *Problem, else 0.
func StatusOf(err error) int {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status
	}
	return 0
}

// Link is a link as the API answers it.
type Link = apiwire.Link

// CreateRequest is a create's body; empty fields take the API's defaults.
type CreateRequest struct {
	// Domain is the host of the domain to make the link on; "" is the
	// client's (WithDomain), else the platform's.
	Domain       string   `json:"domain,omitempty"`
	URL          string   `json:"url"`
	Code         string   `json:"code,omitempty"`
	ExpiresAt    string   `json:"expires_at,omitempty"` // RFC 3339
	RedirectType int      `json:"redirect_type,omitempty"`
	Namespace    string   `json:"namespace,omitempty"`
	Title        string   `json:"title,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	// Rules route clicks by device, country, language or query
	// (docs/rules.md); Password protects the link (it is sent, never
	// answered); MaxClicks limits its counted clicks (0: none).
	Rules     []apiwire.Rule `json:"rules,omitempty"`
	Password  string         `json:"password,omitempty"`
	MaxClicks int64          `json:"max_clicks,omitempty"`
}

// Create creates one link. With a non-empty idempotency key the create is
// retried as needed and replayed reports that an earlier request with that
// key made the link.
func (c *Client) Create(ctx context.Context, req CreateRequest, key string) (l *Link, replayed bool, err error) {
	if req.Domain == "" {
		req.Domain = c.domain
	}
	l = new(Link)
	h, err := c.do(ctx, http.MethodPost, "/api/v1/links", req, key, key != "", l)
	if err != nil {
		return nil, false, err
	}
	return l, h.Get("Idempotent-Replayed") == "true", nil
}

// Get reads one of the tenant's links.
func (c *Client) Get(ctx context.Context, code string) (*Link, error) {
	l := new(Link)
	if _, err := c.do(ctx, http.MethodGet, c.linkPath(code, "", nil), nil, "", true, l); err != nil {
		return nil, err
	}
	return l, nil
}

// Lookup reads one of the tenant's links by its domain's host ("" for the
// platform's) and code: c.WithDomain(host).Get(ctx, code).
func (c *Client) Lookup(ctx context.Context, host, code string) (*Link, error) {
	return c.WithDomain(host).Get(ctx, code)
}

// Patch changes fields of a link (see the API's PATCH) and returns its new
// state. Setting fields to their current value is harmless, so it is
// retried.
func (c *Client) Patch(ctx context.Context, code string, fields map[string]any) (*Link, error) {
	l := new(Link)
	if _, err := c.do(ctx, http.MethodPatch, c.linkPath(code, "", nil), fields, "", true, l); err != nil {
		return nil, err
	}
	return l, nil
}

// ListRequest filters and pages a list of the tenant's links (GET
// /api/v1/links); empty fields are not sent and take the API's defaults.
// A client WithDomain lists that domain's links only.
type ListRequest struct {
	Status        string // e.g. active, disabled, deleted (docs/api.md)
	Namespace     string
	CreatedAfter  string // RFC 3339
	CreatedBefore string // RFC 3339
	Limit         int    // links per page
	Cursor        string // a previous page's NextCursor
	Tags          []string
	TagMode       string // any (default) or all
	Search        string // code prefix, target host, title
}

// Page is one page of a list, newest first; NextCursor is nil on the last.
type Page struct {
	Links      []Link  `json:"links"`
	NextCursor *string `json:"next_cursor"`
}

// List reads one page of the tenant's links.
func (c *Client) List(ctx context.Context, q ListRequest) (*Page, error) {
	v := url.Values{}
	for name, val := range map[string]string{"status": q.Status, "namespace": q.Namespace,
		"created_after": q.CreatedAfter, "created_before": q.CreatedBefore, "cursor": q.Cursor} {
		if val != "" {
			v.Set(name, val)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	for _, t := range q.Tags {
		v.Add("tag", t)
	}
	if q.TagMode != "" {
		v.Set("tag_mode", q.TagMode)
	}
	if q.Search != "" {
		v.Set("q", q.Search)
	}
	if c.domain != "" {
		v.Set("domain", c.domain)
	}
	path := "/api/v1/links"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	p := new(Page)
	if _, err := c.do(ctx, http.MethodGet, path, nil, "", true, p); err != nil {
		return nil, err
	}
	return p, nil
}

// TagLinks adds and removes tags on the tenant's links with codes, all or
// nothing, and returns the links as they are then. Adding a tag twice or
// removing an absent one changes nothing, so it is retried.
func (c *Client) TagLinks(ctx context.Context, codes, add, remove []string) ([]Link, error) {
	body := map[string]any{"codes": codes}
	if c.domain != "" {
		body["domain"] = c.domain
	}
	if len(add) > 0 {
		body["add"] = add
	}
	if len(remove) > 0 {
		body["remove"] = remove
	}
	var p Page
	if _, err := c.do(ctx, http.MethodPost, "/api/v1/links/tags", body, "", true, &p); err != nil {
		return nil, err
	}
	return p.Links, nil
}

// QROptions are a QR code's rendering; zero values take the API's
// defaults (png, 300 pixels, a margin of 4 modules, ecc M).
type QROptions struct {
	Format string // png or svg
	Size   int    // pixels on a side
	Margin *int   // modules of quiet zone; nil: the default
	ECC    string // L, M, Q or H
}

// QR returns the link's short URL drawn as a QR code, and its content
// type.
func (c *Client) QR(ctx context.Context, code string, o QROptions) ([]byte, string, error) {
	v := url.Values{}
	if o.Format != "" {
		v.Set("format", o.Format)
	}
	if o.Size != 0 {
		v.Set("size", strconv.Itoa(o.Size))
	}
	if o.Margin != nil {
		v.Set("margin", strconv.Itoa(*o.Margin))
	}
	if o.ECC != "" {
		v.Set("ecc", o.ECC)
	}
	path := c.linkPath(code, "/qr", v)
	var img []byte
	h, err := c.do(ctx, http.MethodGet, path, nil, "", true, &img)
	if err != nil {
		return nil, "", err
	}
	return img, h.Get("Content-Type"), nil
}

// Delete deletes a link: edges answer 410 for it, and its code is never
// handed out again. Deleting a deleted link succeeds too, so it is
// retried.
func (c *Client) Delete(ctx context.Context, code string) error {
	_, err := c.do(ctx, http.MethodDelete, c.linkPath(code, "", nil), nil, "", true, nil)
	return err
}

// Domain is a domain as the API answers it.
type Domain = apiwire.Domain

// DomainCreate is a new domain's body; empty fields take the API's
// defaults (no redirects, the default robots.txt, ff1 codes).
type DomainCreate struct {
	Host             string `json:"host"`
	RootRedirect     string `json:"root_redirect,omitempty"`
	NotFoundRedirect string `json:"not_found_redirect,omitempty"`
	Robots           string `json:"robots,omitempty"`
	CodeMode         string `json:"code_mode,omitempty"`
}

// Domains lists the domains the tenant may make links on: its own, then
// the platform's.
func (c *Client) Domains(ctx context.Context) ([]Domain, error) {
	var l apiwire.DomainList
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/domains", nil, "", true, &l); err != nil {
		return nil, err
	}
	return l.Domains, nil
}

// CreateDomain adds a domain. It is not retried: a retry after a lost
// answer would be refused as the host taken (by this tenant).
func (c *Client) CreateDomain(ctx context.Context, d DomainCreate) (*Domain, error) {
	out := new(Domain)
	if _, err := c.do(ctx, http.MethodPost, "/api/v1/domains", d, "", false, out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetDomain reads one of the tenant's domains, or the platform's.
func (c *Client) GetDomain(ctx context.Context, host string) (*Domain, error) {
	out := new(Domain)
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/domains/"+url.PathEscape(host), nil, "", true, out); err != nil {
		return nil, err
	}
	return out, nil
}

// PatchDomain changes a domain's settings (root_redirect,
// not_found_redirect, robots; nil or "" clears one). Setting them again is
// harmless, so it is retried.
func (c *Client) PatchDomain(ctx context.Context, host string, fields map[string]any) (*Domain, error) {
	out := new(Domain)
	if _, err := c.do(ctx, http.MethodPatch, "/api/v1/domains/"+url.PathEscape(host), fields, "", true, out); err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveDomain removes a domain: its links stay, its host answers 404 on
// the edges.
func (c *Client) RemoveDomain(ctx context.Context, host string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/v1/domains/"+url.PathEscape(host), nil, "", false, nil)
	return err
}

// BatchResult is one item's outcome in a batch answer: Link on 201, Error
// otherwise.
type BatchResult = apiwire.BatchResult

// BatchAnswer is a batch create's answer.
type BatchAnswer struct {
	Created int           `json:"created"`
	Failed  int           `json:"failed"`
	Results []BatchResult `json:"results"`
	// Replayed: an earlier batch with the same key made these links.
	Replayed bool `json:"-"`
}

// CreateBatch creates up to 1,000 links in one request. With a key the
// batch is idempotent as a whole and retried as needed; the answer then has
// one result per request, in order.
func (c *Client) CreateBatch(ctx context.Context, reqs []CreateRequest, key string) (*BatchAnswer, error) {
	var a BatchAnswer
	h, err := c.do(ctx, http.MethodPost, "/api/v1/links/batch", map[string]any{"links": reqs}, key, key != "", &a)
	if err != nil {
		return nil, err
	}
	if len(a.Results) != len(reqs) {
		return nil, fmt.Errorf("batch answered %d results for %d links", len(a.Results), len(reqs))
	}
	a.Replayed = h.Get("Idempotent-Replayed") == "true"
	return &a, nil
}

// do sends one request, retrying a repeatable one on 429, 502-504 and
// transport errors, and decodes a 2xx body into out.
func (c *Client) do(ctx context.Context, method, path string, body any, key string, repeatable bool, out any) (http.Header, error) {
	var payload []byte
	if body != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // '&' in URLs stays one byte, not six
		if err := enc.Encode(body); err != nil {
			return nil, err
		}
		payload = buf.Bytes()
	}
	attempts := 1
	if repeatable {
		attempts = max(c.Attempts, 1)
	}
	backoff := 200 * time.Millisecond
	var lastErr error
	for i := range attempts {
		if i > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, errors.Join(ctx.Err(), lastErr)
			case <-t.C:
			}
			backoff = min(backoff*2, c.MaxBackoff)
		}
		h, retryAfter, err := c.once(ctx, method, path, payload, key, out)
		if err == nil {
			return h, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, err
		}
		switch StatusOf(err) {
		case 0, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		default:
			return nil, err
		}
		if retryAfter > 0 {
			backoff = min(retryAfter, max(c.MaxBackoff, time.Second))
		}
	}
	return nil, lastErr
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte, key string, out any) (http.Header, time.Duration, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if raw, ok := out.(*[]byte); ok {
			*raw = b // not JSON: an image
			return resp.Header, 0, nil
		}
		if out != nil && len(b) > 0 {
			if err := json.Unmarshal(b, out); err != nil {
				return nil, 0, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
			}
		}
		return resp.Header, 0, nil
	}
	p := &Problem{}
	if json.Unmarshal(b, p) != nil || p.Status == 0 {
		snippet := strings.TrimSpace(string(b))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "…"
		}
		p = &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Detail: snippet}
	}
	var retryAfter time.Duration
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	return resp.Header, retryAfter, p
}
