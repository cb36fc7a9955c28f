package importjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// Links is the write path an import creates links with (links.Service).
type Links interface {
	CreateBatch(ctx context.Context, tenantID int64, key string, reqs []links.CreateRequest) (links.BatchResult, error)
	Get(ctx context.Context, tenantID int64, domain, code string) (*links.Link, error)
}

// Client is an importer.Client in control's own process: it creates and
// reads the links of one tenant through the links service, answering as
// the creator API's batch and get routes do (statuses and problems), so
// the importer decides every row as it does over HTTP. The tenant is the
// job's, which the console took from its session; nothing in the file
// can name another.
type Client struct {
	links  Links
	tenant int64
	short  links.ShortURLs
	log    *slog.Logger
	now    func() time.Time
	// attempts and backoff bound the retries of a batch the service
	// could not take (link.ErrUnavailable: the allocator or the database
	// briefly unreachable). A keyed batch is idempotent, so a retry never
	// makes a link twice.
	attempts int
	backoff  time.Duration
}

var _ importer.Client = (*Client)(nil)

// NewClient returns the Client of tenant's links; short is the public
// URL's rules (its host is the platform's domain).
func NewClient(l Links, tenant int64, short links.ShortURLs, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{links: l, tenant: tenant, short: short, log: log, now: time.Now, attempts: 6, backoff: 200 * time.Millisecond}
}

// domain is the service's name of host: the platform's host is "" (as
// the API takes it).
func (c *Client) domain(host string) string {
	if host == c.short.Host {
		return ""
	}
	return host
}

// CreateBatch implements importer.Client: one keyed batch through the
// links service, retried while the service is unavailable.
func (c *Client) CreateBatch(ctx context.Context, reqs []apiclient.CreateRequest, key string) (*apiclient.BatchAnswer, error) {
	in := make([]links.CreateRequest, len(reqs))
	for i, r := range reqs {
		in[i] = links.CreateRequest{Domain: c.domain(r.Domain), URL: r.URL, Code: r.Code, RedirectType: link.RedirectType(r.RedirectType),
			Namespace: r.Namespace, Title: r.Title, Tags: r.Tags, MaxClicks: r.MaxClicks}
		if in[i].Rules, in[i].Rejected = importer.LinkRules(r.Rules); in[i].Rejected != nil {
			continue
		}
		if r.ExpiresAt != "" {
			t, err := time.Parse(time.RFC3339, r.ExpiresAt)
			if err != nil {
				in[i].Rejected = fmt.Errorf("%w: expires_at must be RFC 3339", link.ErrInvalidInput)
			}
			in[i].ExpiresAt = t
		}
	}
	var res links.BatchResult
	var err error
	wait := c.backoff
	for attempt := 1; ; attempt++ {
		res, err = c.links.CreateBatch(ctx, c.tenant, key, in)
		if err == nil || !errors.Is(err, link.ErrUnavailable) || errors.Is(err, link.ErrExhausted) || attempt == c.attempts {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		p := c.problem(err, "")
		return nil, &p
	}
	ans := &apiclient.BatchAnswer{Replayed: res.Replayed, Results: make([]apiclient.BatchResult, len(res.Items))}
	now := c.now()
	for i, it := range res.Items {
		r := apiclient.BatchResult{Index: i}
		if it.Err == nil && it.Link != nil {
			ans.Created++
			r.Status, r.Link = http.StatusCreated, c.wire(it.Link, now)
		} else {
			ans.Failed++
			p := c.problem(it.Err, in[i].Domain)
			r.Status, r.Error = p.Status, &p
		}
		ans.Results[i] = r
	}
	return ans, nil
}

// Lookup implements importer.Client.
func (c *Client) Lookup(ctx context.Context, host, code string) (*apiclient.Link, error) {
	l, err := c.links.Get(ctx, c.tenant, c.domain(host), code)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		p := c.problem(err, "")
		if errors.Is(err, link.ErrNotFound) {
			p.Detail = "no such link"
		}
		return nil, &p
	}
	return c.wire(l, c.now()), nil
}

// wire is l as the API answers it (the fields the importer reads, and
// the ones a person reading a mapping would).
func (c *Client) wire(l *links.Link, now time.Time) *apiclient.Link {
	w := &apiclient.Link{Code: l.Code, Domain: l.Domain, ShortURL: c.short.Of(l.DomainID, l.Domain, l.Code), URL: l.URL, URLOriginal: l.URLOriginal,
		RedirectType: int(l.RedirectType), Status: string(links.State(&l.Link, now)), Namespace: l.Namespace, Version: l.Version, Tags: l.Tags}
	if l.DomainID == link.DefaultDomain {
		w.Domain = c.short.Host
	}
	if l.Title != "" {
		w.Title = &l.Title
	}
	return w
}

// problem is err as the creator API answers it, word for word
// (control/api's clientError, itemProblem and unknownDomain), so a
// console import's rejects file reads as the CLI's: the status decides
// what the importer does with a row, the detail is the reason its rejects
// file gives. A domain the tenant may not use (link.ErrNotFound on a
// create) names domain.
func (c *Client) problem(err error, domain string) apiclient.Problem {
	status, detail := http.StatusInternalServerError, "internal error"
	switch {
	case err == nil:
		detail = "no answer for this link"
	case errors.Is(err, link.ErrInvalidInput), errors.Is(err, link.ErrInvalidURL), errors.Is(err, link.ErrHost):
		status, detail = http.StatusBadRequest, err.Error()
	case errors.Is(err, link.ErrNotFound):
		status, detail = http.StatusNotFound, fmt.Sprintf("no domain %.260q is yours to use; GET /api/v1/domains lists the ones you may", domain)
	case errors.Is(err, link.ErrDeleted):
		status, detail = http.StatusGone, "the link was deleted; its code is never reused"
	case errors.Is(err, link.ErrCodeTaken):
		status, detail = http.StatusConflict, "that code is already taken"
	case errors.Is(err, link.ErrIdempotencyConflict):
		status, detail = http.StatusConflict, "this Idempotency-Key was used with a different request; use a new key for a new request"
	case errors.Is(err, link.ErrExhausted):
		c.log.Error("import refused: ID space exhausted", "tenant", c.tenant, "err", err)
		status, detail = http.StatusInsufficientStorage, "the link ID space is exhausted: no new link can be created until an operator extends the namespace; do not retry"
	case errors.Is(err, link.ErrUnavailable):
		c.log.Warn("import write failed: unavailable", "tenant", c.tenant, "err", err)
		status, detail = http.StatusServiceUnavailable, "temporarily unavailable, retry this link"
	default:
		c.log.Error("import write failed", "tenant", c.tenant, "err", err)
	}
	return apiclient.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
}
