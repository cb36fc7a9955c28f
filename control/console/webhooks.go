package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/shared/link"
)

// Webhooks is the webhook management the console's pages drive
// (control/webhooks.Service; docs/webhooks.md).
type Webhooks interface {
	Create(ctx context.Context, tenant int64, in webhooks.Input) (*webhooks.Endpoint, []byte, error)
	List(ctx context.Context, tenant int64) ([]*webhooks.Endpoint, error)
	Get(ctx context.Context, tenant int64, id string) (*webhooks.Endpoint, error)
	Delete(ctx context.Context, tenant int64, id string) error
	RotateSecret(ctx context.Context, tenant int64, id string, grace time.Duration) (*webhooks.Endpoint, []byte, error)
	SetEnabled(ctx context.Context, tenant int64, id string, enabled bool) (*webhooks.Endpoint, error)
	Deliveries(ctx context.Context, tenant int64, id string, q webhooks.DeliveryQuery) ([]webhooks.Delivery, error)
	SendTest(ctx context.Context, tenant int64, id string) (string, error)
}

// webhookRoutes are the webhook pages, when the console has webhooks.
func (s *Server) webhookRoutes() {
	if s.cfg.Webhooks == nil {
		return
	}
	s.mux.HandleFunc("GET "+Prefix+"webhooks", s.authed(s.webhooksPage))
	s.mux.HandleFunc("POST "+Prefix+"webhooks", s.authed(s.createWebhook))
	s.mux.HandleFunc("GET "+Prefix+"webhooks/{id}", s.authed(s.webhookPage))
	s.mux.HandleFunc("GET "+Prefix+"webhooks/{id}/delete", s.authed(s.confirmWebhookDelete))
	s.mux.HandleFunc("POST "+Prefix+"webhooks/{id}/{action}", s.authed(s.webhookAction))
}

type webhooksData struct {
	Endpoints []*webhooks.Endpoint
	Types     []webhooks.EventType
	Form      webhookForm
	Problem   string
	Secret    string // a new endpoint's: shown on this answer only
	NewID     string
	CSRF      string
}

type webhookForm struct {
	URL, Description string
	Types            map[string]bool
}

func (s *Server) webhooksPage(w http.ResponseWriter, r *http.Request, sess Session) {
	s.renderWebhooks(w, r, sess, http.StatusOK, webhooksData{Form: webhookForm{Types: map[string]bool{}}})
}

func (s *Server) renderWebhooks(w http.ResponseWriter, r *http.Request, sess Session, status int, d webhooksData) {
	es, err := s.cfg.Webhooks.List(r.Context(), sess.TenantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d.Endpoints, d.Types, d.CSRF = es, webhooks.EventTypes, sess.CSRF
	notice := ""
	if r.URL.Query().Get("done") == "deleted" {
		notice = "Endpoint deleted, with its delivery log."
	}
	s.render(w, r, status, "webhooks", page{Title: "Webhooks", Session: &sess, Notice: notice, Data: d})
}

// createWebhook registers an endpoint and shows its secret in this answer
// only; a refused form is shown again as typed, with the reason.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, sess Session) {
	f := webhookForm{URL: r.PostForm.Get("url"), Description: r.PostForm.Get("description"), Types: map[string]bool{}}
	var types []string
	for _, t := range r.PostForm["event"] {
		types = append(types, t)
		f.Types[t] = true
	}
	e, key, err := s.cfg.Webhooks.Create(r.Context(), sess.TenantID, webhooks.Input{URL: f.URL, Description: f.Description, EventTypes: types})
	switch {
	case errors.Is(err, link.ErrInvalidInput), errors.Is(err, webhooks.ErrTooMany):
		s.renderWebhooks(w, r, sess, http.StatusBadRequest, webhooksData{Form: f, Problem: err.Error()})
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	s.log.Info("console registered a webhook endpoint", "request_id", requestID(r), "tenant", sess.TenantID, "endpoint", e.ID)
	s.renderWebhooks(w, r, sess, http.StatusOK, webhooksData{Form: webhookForm{Types: map[string]bool{}},
		Secret: webhooks.EncodeSecret(key), NewID: e.ID})
}

type webhookData struct {
	E          *webhooks.Endpoint
	Deliveries []webhooks.Delivery
	Next       string // the next page's cursor (an attempt id), or ""
	Secret     string // a rotated secret: shown on this answer only
	CSRF       string
}

// deliveriesPage is the delivery log's page size in the console.
const deliveriesPage = 50

func (s *Server) webhookPage(w http.ResponseWriter, r *http.Request, sess Session) {
	s.renderWebhook(w, r, sess, "")
}

func (s *Server) renderWebhook(w http.ResponseWriter, r *http.Request, sess Session, secret string) {
	id := r.PathValue("id")
	e, err := s.cfg.Webhooks.Get(r.Context(), sess.TenantID, id)
	if errors.Is(err, webhooks.ErrNotFound) {
		s.errorPage(w, r, http.StatusNotFound, "There is no such webhook endpoint in this tenant.")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := webhooks.DeliveryQuery{Limit: deliveriesPage + 1}
	if v := r.URL.Query().Get("before"); v != "" {
		if q.Before, err = strconv.ParseInt(v, 10, 64); err != nil || q.Before <= 0 {
			s.errorPage(w, r, http.StatusBadRequest, "That page of the delivery log does not exist.")
			return
		}
	}
	ds, err := s.cfg.Webhooks.Deliveries(r.Context(), sess.TenantID, id, q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := webhookData{E: e, Deliveries: ds, Secret: secret, CSRF: sess.CSRF}
	if len(ds) > deliveriesPage {
		d.Deliveries = ds[:deliveriesPage]
		d.Next = strconv.FormatInt(ds[deliveriesPage-1].ID, 10)
	}
	notices := map[string]string{
		"tested":   "A webhook.test event is on its way: its attempts appear below within moments (reload).",
		"enabled":  "Endpoint enabled: events from now on are delivered; those of the disabled period are not.",
		"disabled": "Endpoint disabled: nothing is sent to it until you enable it.",
	}
	s.render(w, r, http.StatusOK, "webhook", page{Title: "Webhook " + e.ID, Session: &sess,
		Notice: notices[r.URL.Query().Get("done")], Data: d})
}

// confirmWebhookDelete asks before an endpoint and its delivery log go:
// the endpoint page's Delete leads here, and only this page's button
// posts the delete.
func (s *Server) confirmWebhookDelete(w http.ResponseWriter, r *http.Request, sess Session) {
	e, err := s.cfg.Webhooks.Get(r.Context(), sess.TenantID, r.PathValue("id"))
	if errors.Is(err, webhooks.ErrNotFound) {
		s.errorPage(w, r, http.StatusNotFound, "There is no such webhook endpoint in this tenant.")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "webhook_delete", page{Title: "Delete webhook " + e.ID, Session: &sess, Data: webhookData{E: e, CSRF: sess.CSRF}})
}

// webhookAction is a button of an endpoint's page: test, enable, disable,
// rotate (the new secret shown on the answer only) or delete.
func (s *Server) webhookAction(w http.ResponseWriter, r *http.Request, sess Session) {
	id, ctx, tenant := r.PathValue("id"), r.Context(), sess.TenantID
	var err error
	done := ""
	switch r.PathValue("action") {
	case "test":
		done = "tested"
		_, err = s.cfg.Webhooks.SendTest(ctx, tenant, id)
	case "enable", "disable":
		done = r.PathValue("action") + "d"
		_, err = s.cfg.Webhooks.SetEnabled(ctx, tenant, id, done == "enabled")
	case "rotate":
		var key []byte
		if _, key, err = s.cfg.Webhooks.RotateSecret(ctx, tenant, id, webhooks.DefaultGrace); err == nil {
			s.renderWebhook(w, r, sess, webhooks.EncodeSecret(key))
			return
		}
	case "delete":
		if err = s.cfg.Webhooks.Delete(ctx, tenant, id); err == nil {
			http.Redirect(w, r, Prefix+"webhooks?done=deleted", http.StatusSeeOther)
			return
		}
	default:
		s.errorPage(w, r, http.StatusNotFound, "There is no such page in the console.")
		return
	}
	switch {
	case errors.Is(err, webhooks.ErrNotFound):
		s.errorPage(w, r, http.StatusNotFound, "There is no such webhook endpoint in this tenant.")
	case err != nil:
		s.fail(w, r, err)
	default:
		http.Redirect(w, r, Prefix+"webhooks/"+id+"?done="+done, http.StatusSeeOther)
	}
}
