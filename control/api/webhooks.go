package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/shared/link"
)

// Webhooks is the webhook management /api/v1/webhooks drives
// (control/webhooks.Service; docs/webhooks.md).
type Webhooks interface {
	Create(ctx context.Context, tenant int64, in webhooks.Input) (*webhooks.Endpoint, []byte, error)
	List(ctx context.Context, tenant int64) ([]*webhooks.Endpoint, error)
	Get(ctx context.Context, tenant int64, id string) (*webhooks.Endpoint, error)
	Update(ctx context.Context, tenant int64, id string, p webhooks.Patch) (*webhooks.Endpoint, error)
	Delete(ctx context.Context, tenant int64, id string) error
	RotateSecret(ctx context.Context, tenant int64, id string, grace time.Duration) (*webhooks.Endpoint, []byte, error)
	SetEnabled(ctx context.Context, tenant int64, id string, enabled bool) (*webhooks.Endpoint, error)
	Deliveries(ctx context.Context, tenant int64, id string, q webhooks.DeliveryQuery) ([]webhooks.Delivery, error)
	SendTest(ctx context.Context, tenant int64, id string) (string, error)
}

// webhookBody is a new endpoint, or (all fields optional) a change of one.
type webhookBody struct {
	URL         *string
	Description *string
	EventTypes  []string
	types       bool // event_types was sent
}

var webhookShape = jsonObject(
	into(jsonField("url", jsonString), func(b *webhookBody, v jsonValue) { b.URL = ptr(v.str) }),
	into(jsonField("description", jsonString), func(b *webhookBody, v jsonValue) { b.Description = ptr(v.str) }),
	into(jsonField("event_types", jsonArray(jsonString)), func(b *webhookBody, v jsonValue) {
		b.EventTypes, b.types = append(b.EventTypes, v.str), true
	}),
)

// rotateBody is a secret rotation's optional body.
type rotateBody struct {
	Grace *int64
}

var rotateShape = jsonObject(
	into(jsonField("grace_seconds", jsonInteger), func(b *rotateBody, v jsonValue) { b.Grace = ptr(v.num) }),
)

// MaxDeliveryPage bounds a page of the delivery log.
const MaxDeliveryPage = 100

func rfc3339Ptr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

func wireEndpoint(e *webhooks.Endpoint) apiwire.WebhookEndpoint {
	w := apiwire.WebhookEndpoint{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: e.EventTypes, Enabled: e.Enabled,
		DisabledAt: rfc3339Ptr(e.DisabledAt), FailingSince: rfc3339Ptr(e.FailingSince), ConsecutiveFailures: e.ConsecutiveFailures,
		LastSuccessAt: rfc3339Ptr(e.LastSuccessAt), CreatedAt: *rfc3339Ptr(e.CreatedAt), UpdatedAt: *rfc3339Ptr(e.UpdatedAt)}
	if !e.Enabled && e.DisabledReason != "" {
		w.DisabledReason = ptr(e.DisabledReason)
	}
	if len(e.PrevSecret) > 0 {
		w.PreviousSecretExpiresAt = rfc3339Ptr(e.PrevExpiresAt)
	}
	if w.EventTypes == nil {
		w.EventTypes = []string{}
	}
	return w
}

// webhooksFor is the webhook service a webhooks route may use for tenant;
// when there is none it answers the request and ok is false.
func (s *Server) webhooksFor(w http.ResponseWriter, r *http.Request, tenant int64) (Webhooks, bool) {
	if s.cfg.Webhooks == nil {
		writeProblem(w, r, http.StatusNotFound, "webhooks are not configured on this server")
		return nil, false
	}
	if tenant <= 0 {
		s.writeError(w, r, fmt.Errorf("webhooks: tenant id %d from authentication", tenant))
		return nil, false
	}
	return s.cfg.Webhooks, true
}

// writeWebhookError answers a webhook service's error: another tenant's
// endpoint is 404 exactly as one that does not exist.
func (s *Server) writeWebhookError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, webhooks.ErrNotFound):
		writeProblem(w, r, http.StatusNotFound, "no such webhook endpoint")
	case errors.Is(err, webhooks.ErrTooMany):
		writeProblem(w, r, http.StatusConflict, err.Error()+"; delete one first")
	default:
		s.writeError(w, r, err)
	}
}

// noQuery refuses a query string on a route that takes none.
func (s *Server) noQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery != "" {
		s.writeError(w, r, fmt.Errorf("%w: this webhooks route takes no query parameters", link.ErrInvalidInput))
		return false
	}
	return true
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.webhooksFor(w, r, tenant)
	if !ok || !s.noQuery(w, r) {
		return
	}
	var in webhookBody
	if err := decodeJSON(w, r, &in, webhookShape, MaxBodyBytes, "application/json"); err != nil {
		writeBodyError(w, r, err)
		return
	}
	if in.URL == nil {
		s.writeError(w, r, fmt.Errorf("%w: url is required", link.ErrInvalidInput))
		return
	}
	if !in.types {
		s.writeError(w, r, fmt.Errorf("%w: event_types must list one or more of link.created, link.updated, link.deleted, clicks.aggregated", link.ErrInvalidInput))
		return
	}
	e, key, err := svc.Create(r.Context(), tenant, webhooks.Input{URL: *in.URL, Description: deref(in.Description), EventTypes: in.EventTypes})
	if err != nil {
		s.writeWebhookError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/webhooks/"+e.ID)
	writeJSON(w, http.StatusCreated, apiwire.WebhookSecret{Endpoint: wireEndpoint(e), Secret: webhooks.EncodeSecret(key)})
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.webhooksFor(w, r, tenant)
	if !ok || !s.noQuery(w, r) {
		return
	}
	es, err := svc.List(r.Context(), tenant)
	if err != nil {
		s.writeWebhookError(w, r, err)
		return
	}
	out := apiwire.WebhookEndpointList{Endpoints: make([]apiwire.WebhookEndpoint, len(es))}
	for i, e := range es {
		out.Endpoints[i] = wireEndpoint(e)
	}
	writeJSON(w, http.StatusOK, out)
}

// endpointAnswer answers one endpoint, or the service's error.
func (s *Server) endpointAnswer(w http.ResponseWriter, r *http.Request, e *webhooks.Endpoint, err error) {
	if err != nil {
		s.writeWebhookError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireEndpoint(e))
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request, tenant int64) {
	if svc, ok := s.webhooksFor(w, r, tenant); ok && s.noQuery(w, r) {
		e, err := svc.Get(r.Context(), tenant, r.PathValue("id"))
		s.endpointAnswer(w, r, e, err)
	}
}

func (s *Server) patchWebhook(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.webhooksFor(w, r, tenant)
	if !ok || !s.noQuery(w, r) {
		return
	}
	var in webhookBody
	if err := decodeJSON(w, r, &in, webhookShape, MaxBodyBytes, "application/json", "application/merge-patch+json"); err != nil {
		writeBodyError(w, r, err)
		return
	}
	p := webhooks.Patch{URL: in.URL, Description: in.Description}
	if in.types {
		p.EventTypes = append([]string{}, in.EventTypes...)
	}
	e, err := svc.Update(r.Context(), tenant, r.PathValue("id"), p)
	s.endpointAnswer(w, r, e, err)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.webhooksFor(w, r, tenant)
	if !ok || !s.noQuery(w, r) {
		return
	}
	if err := svc.Delete(r.Context(), tenant, r.PathValue("id")); err != nil {
		s.writeWebhookError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.webhooksFor(w, r, tenant)
	if !ok || !s.noQuery(w, r) {
		return
	}
	body, err := readBody(w, r, MaxBodyBytes, []string{"application/json"})
	if err != nil {
		writeBodyError(w, r, err)
		return
	}
	var in rotateBody
	if len(bytes.TrimSpace(body)) > 0 { // the body is optional
		if err := parseJSON(body, rotateShape, &in); err != nil {
			writeBodyError(w, r, err)
			return
		}
	}
	grace := webhooks.DefaultGrace
	if in.Grace != nil {
		if *in.Grace < 0 || *in.Grace > int64(webhooks.MaxGrace/time.Second) {
			s.writeError(w, r, fmt.Errorf("%w: grace_seconds must be 0 to %d", link.ErrInvalidInput, int64(webhooks.MaxGrace/time.Second)))
			return
		}
		grace = time.Duration(*in.Grace) * time.Second
	}
	e, key, err := svc.RotateSecret(r.Context(), tenant, r.PathValue("id"), grace)
	if err != nil {
		s.writeWebhookError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.WebhookSecret{Endpoint: wireEndpoint(e), Secret: webhooks.EncodeSecret(key)})
}

func (s *Server) enableWebhook(w http.ResponseWriter, r *http.Request, tenant int64) {
	s.setWebhookEnabled(w, r, tenant, true)
}

func (s *Server) disableWebhook(w http.ResponseWriter, r *http.Request, tenant int64) {
	s.setWebhookEnabled(w, r, tenant, false)
}

func (s *Server) setWebhookEnabled(w http.ResponseWriter, r *http.Request, tenant int64, enabled bool) {
	if svc, ok := s.webhooksFor(w, r, tenant); ok && s.noQuery(w, r) {
		e, err := svc.SetEnabled(r.Context(), tenant, r.PathValue("id"), enabled)
		s.endpointAnswer(w, r, e, err)
	}
}

func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.webhooksFor(w, r, tenant)
	if !ok || !s.noQuery(w, r) {
		return
	}
	id, err := svc.SendTest(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		s.writeWebhookError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, apiwire.WebhookTest{EventID: id})
}

func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.webhooksFor(w, r, tenant)
	if !ok {
		return
	}
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("%w: the query string is malformed: %v", link.ErrInvalidInput, err))
		return
	}
	q := webhooks.DeliveryQuery{Limit: 20}
	for name, vs := range vals {
		if len(vs) > 1 {
			s.writeError(w, r, fmt.Errorf("%w: send %s once, not %d times", link.ErrInvalidInput, name, len(vs)))
			return
		}
		v := vs[0]
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxDeliveryPage {
				s.writeError(w, r, fmt.Errorf("%w: limit must be a number from 1 to %d", link.ErrInvalidInput, MaxDeliveryPage))
				return
			}
			q.Limit = n
		case "cursor":
			id, err := decodeCursor(v)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			q.Before = int64(id)
		case "event_id":
			q.EventID = v
		case "outcome":
			if v != "succeeded" && v != "failed" {
				s.writeError(w, r, fmt.Errorf("%w: outcome must be succeeded or failed, not %.20q", link.ErrInvalidInput, v))
				return
			}
			q.Outcome = v
		default:
			s.writeError(w, r, fmt.Errorf("%w: unknown query parameter %.40q; the parameters are limit, cursor, event_id and outcome", link.ErrInvalidInput, name))
			return
		}
	}
	// One more than the page, to tell whether there is a next one.
	want := q.Limit
	q.Limit++
	ds, err := svc.Deliveries(r.Context(), tenant, r.PathValue("id"), q)
	if err != nil {
		s.writeWebhookError(w, r, err)
		return
	}
	out := apiwire.WebhookDeliveryPage{Deliveries: make([]apiwire.WebhookDelivery, 0, min(len(ds), want))}
	for i, d := range ds {
		if i == want {
			out.NextCursor = ptr(encodeCursor(uint64(ds[i-1].ID)))
			break
		}
		wd := apiwire.WebhookDelivery{ID: strconv.FormatInt(d.ID, 10), EventID: d.EventID, EventType: d.EventType, Attempt: d.Attempt,
			Outcome: "failed", LatencyMS: int(d.Latency.Milliseconds()), NextAttemptAt: rfc3339Ptr(d.NextAttemptAt),
			AttemptedAt: *rfc3339Ptr(d.AttemptedAt)}
		if d.Succeeded {
			wd.Outcome = "succeeded"
		}
		if d.StatusCode != 0 {
			wd.StatusCode = ptr(d.StatusCode)
		}
		if d.Error != "" {
			wd.Error = ptr(d.Error)
		}
		if d.ResponseBody != "" {
			wd.ResponseBody = ptr(d.ResponseBody)
		}
		out.Deliveries = append(out.Deliveries, wd)
	}
	writeJSON(w, http.StatusOK, out)
}
