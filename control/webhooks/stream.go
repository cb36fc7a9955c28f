package webhooks

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// The WEBHOOKS stream (docs/webhooks.md, "The raw streams"): one message
// per event, its body exactly what endpoints are sent, on
// webhooks.events.<tenant id>.<event type> (link.created is two tokens),
// and test events on webhooks.test.<endpoint id>. The message id
// (Nats-Msg-Id) is the event id.
const (
	Stream        = "WEBHOOKS"
	SubjectEvents = "webhooks.events"
	SubjectTest   = "webhooks.test"
	// HeaderType and HeaderTenant repeat the body's type and tenant, so a
	// consumer can route without parsing it.
	HeaderType   = "Edgelink-Event-Type"
	HeaderTenant = "Edgelink-Tenant"
)

// EventSubject is the subject of tenant's events of type t.
func EventSubject(tenant int64, t EventType) string {
	return SubjectEvents + "." + strconv.FormatInt(tenant, 10) + "." + string(t)
}

// TestSubject is the subject of endpoint id's test events.
func TestSubject(id string) string { return SubjectTest + "." + id }

// StreamConfig is the WEBHOOKS stream: events are kept for maxAge (longer
// than the retry schedule's horizon), at most maxBytes, oldest dropped
// first; a message id seen within dupWindow is stored once.
func StreamConfig(maxAge time.Duration, maxBytes int64, dupWindow time.Duration, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       Stream,
		Subjects:   []string{SubjectEvents + ".>", SubjectTest + ".>"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     maxAge,
		MaxBytes:   maxBytes,
		Duplicates: dupWindow,
		Replicas:   max(replicas, 1),
		Discard:    jetstream.DiscardOld,
	}
}

// EventID is the event id of an outbox row's uuid: "evt_" and its 32 hex
// digits.
func EventID(uuid [16]byte) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 36)
	b = append(b, "evt_"...)
	for _, c := range uuid {
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return string(b)
}

// linkRow is a link as schema 018's webhook_link_data writes it.
type linkRow struct {
	ID           uint64     `json:"id"`
	Code         string     `json:"code"`
	DomainID     uint32     `json:"domain_id"`
	Domain       string     `json:"domain"`
	URL          string     `json:"url"`
	URLOriginal  string     `json:"url_original"`
	RedirectType int        `json:"redirect_type"`
	Status       string     `json:"status"`
	Namespace    string     `json:"namespace"`
	ExpiresAt    *time.Time `json:"expires_at"`
	Version      uint64     `json:"version"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	Title        *string    `json:"title"`
	Tags         []string   `json:"tags"`
	// MaxClicks and ClicksCounted are the link's click limit and the
	// clicks counted against it (schema 021); null without a limit.
	MaxClicks     *int64 `json:"max_clicks"`
	ClicksCounted *int64 `json:"clicks_counted"`
}

// clicksRow is a clicks.aggregated event as the store writes it.
type clicksRow struct {
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
	Clicks      int64     `json:"clicks"`
	BotClicks   int64     `json:"bot_clicks"`
	Links       int64     `json:"links"`
	Top         []struct {
		DomainID  uint32 `json:"domain_id"`
		Domain    string `json:"domain"`
		Code      string `json:"code"`
		Clicks    int64  `json:"clicks"`
		BotClicks int64  `json:"bot_clicks"`
	} `json:"top"`
}

// OutboxEvent is an event waiting in webhook_outbox.
type OutboxEvent struct {
	Seq        int64
	ID         string // EventID
	TenantID   int64
	Type       EventType
	OccurredAt time.Time
	Data       []byte // the row's JSON (webhook_link_data, or the click window's)
}

// Renderer turns outbox events into the bodies endpoints are sent: links
// as the API shows them, with their short URLs.
type Renderer struct {
	Short links.ShortURLs
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Body is e's JSON body. It is a function of e and the short-URL
// configuration only, so a publish repeated after a crash sends the same
// bytes.
func (r Renderer) Body(e *OutboxEvent) ([]byte, error) {
	head := func(data any) apiwire.WebhookEvent[any] {
		return apiwire.WebhookEvent[any]{ID: e.ID, Type: string(e.Type), Timestamp: rfc3339(e.OccurredAt), TenantID: e.TenantID, Data: data}
	}
	switch e.Type {
	case LinkCreated, LinkUpdated, LinkDeleted:
		var l linkRow
		if err := json.Unmarshal(e.Data, &l); err != nil {
			return nil, fmt.Errorf("event %s: link data: %w", e.ID, err)
		}
		return json.Marshal(head(r.link(&l, e.OccurredAt)))
	case ClicksAggregated:
		var c clicksRow
		if err := json.Unmarshal(e.Data, &c); err != nil {
			return nil, fmt.Errorf("event %s: clicks data: %w", e.ID, err)
		}
		out := apiwire.ClicksAggregated{PeriodStart: rfc3339(c.PeriodStart), PeriodEnd: rfc3339(c.PeriodEnd),
			Clicks: c.Clicks, BotClicks: c.BotClicks, Links: c.Links, Top: make([]apiwire.LinkClicks, 0, len(c.Top)),
			Other: apiwire.ClicksSummary{Links: c.Links, Clicks: c.Clicks, BotClicks: c.BotClicks}}
		for _, t := range c.Top {
			d := link.DomainID(t.DomainID)
			out.Top = append(out.Top, apiwire.LinkClicks{Domain: r.Short.HostOf(d, t.Domain), Code: t.Code,
				ShortURL: r.Short.Of(d, t.Domain, t.Code), Clicks: t.Clicks, BotClicks: t.BotClicks})
			out.Other.Links--
			out.Other.Clicks -= t.Clicks
			out.Other.BotClicks -= t.BotClicks
		}
		return json.Marshal(head(out))
	case TestEvent:
		return json.Marshal(head(json.RawMessage(e.Data)))
	}
	return nil, fmt.Errorf("event %s: unknown type %q", e.ID, e.Type)
}

// link is l as the API answers it, its state judged at the event's time.
func (r Renderer) link(l *linkRow, at time.Time) apiwire.Link {
	d := link.DomainID(l.DomainID)
	ll := link.Link{Status: link.Status(l.Status)}
	if l.ExpiresAt != nil {
		ll.ExpiresAt = *l.ExpiresAt
	}
	if l.MaxClicks != nil && l.ClicksCounted != nil {
		ll.Extras.MaxClicks, ll.Extras.ClicksCounted = *l.MaxClicks, *l.ClicksCounted
	}
	out := apiwire.Link{Code: l.Code, Domain: r.Short.HostOf(d, l.Domain), ShortURL: r.Short.Of(d, l.Domain, l.Code),
		URL: l.URL, URLOriginal: l.URLOriginal, RedirectType: l.RedirectType, Status: string(links.State(&ll, at)),
		Namespace: l.Namespace, Version: l.Version, CreatedAt: rfc3339(l.CreatedAt), UpdatedAt: rfc3339(l.UpdatedAt),
		Title: l.Title, Tags: l.Tags, MaxClicks: l.MaxClicks}
	if l.MaxClicks != nil {
		out.ClicksCounted = l.ClicksCounted
	}
	if l.ExpiresAt != nil {
		s := rfc3339(*l.ExpiresAt)
		out.ExpiresAt = &s
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	return out
}
