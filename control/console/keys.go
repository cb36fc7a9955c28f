package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

type keysData struct {
	Keys    []Key
	Current int64  // the session's own key
	Secret  string // a key just created: shown on this answer only
	CSRF    string
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, sess Session) {
	s.renderKeys(w, r, sess, "")
}

func (s *Server) renderKeys(w http.ResponseWriter, r *http.Request, sess Session, secret string) {
	ks, err := s.keys.Keys(r.Context(), sess.TenantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n := ""
	if r.URL.Query().Get("done") == "revoked" {
		n = "Key revoked: requests with it fail from now on, and its console sessions have ended."
	}
	s.render(w, r, http.StatusOK, "keys", page{Title: "API keys", Session: &sess, Notice: n,
		Data: keysData{Keys: ks, Current: sess.KeyID, Secret: secret, CSRF: sess.CSRF}})
}

// createKey issues a key and shows its secret in this answer only: it is
// never in a URL, and the page is not cached (Cache-Control: no-store).
func (s *Server) createKey(w http.ResponseWriter, r *http.Request, sess Session) {
	secret, err := s.keys.CreateKey(r.Context(), sess.TenantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("console created an API key", "request_id", requestID(r), "tenant", sess.TenantID)
	s.renderKeys(w, r, sess, secret)
}

// revokeKey revokes one of the tenant's keys. Revoking the session's own
// key ends the session with it: the browser is sent to sign-in.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, sess Session) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.errorPage(w, r, http.StatusNotFound, "There is no such key in this tenant.")
		return
	}
	err = s.keys.RevokeKey(r.Context(), sess.TenantID, id, s.cfg.Now())
	if errors.Is(err, link.ErrNotFound) {
		s.errorPage(w, r, http.StatusNotFound, "There is no such key in this tenant.")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("console revoked an API key", "request_id", requestID(r), "tenant", sess.TenantID, "key_id", id)
	if id == sess.KeyID {
		s.setCookie(w, s.sessionCookie(), "", time.Time{})
		http.Redirect(w, r, Prefix+"sign-in?ended=1", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"keys?done=revoked", http.StatusSeeOther)
}

// qrKeyPrefix starts the keys the console hands its in-process QR
// renderer (QRAuth): they name a tenant the console has already
// authenticated by its session.
const qrKeyPrefix = "console-session-tenant:"

// QRAuth authenticates the requests the console makes of the API handler
// it is given as Config.QR, and only those: that handler must be a
// separate instance of the API that listens nowhere, built with QRAuth as
// its Authenticator, so the console draws QR codes with the API's own
// renderer. A key is the tenant the console's session resolved; the
// limits are the server's defaults.
type QRAuth struct{}

// Authenticate implements the API's Authenticator.
func (QRAuth) Authenticate(_ context.Context, key string) (int64, float64, int, error) {
	v, ok := strings.CutPrefix(key, qrKeyPrefix)
	if !ok {
		return 0, 0, 0, link.ErrUnauthorized
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, 0, 0, link.ErrUnauthorized
	}
	return id, 0, 0, nil
}

// linkQR downloads a link's QR code, PNG or SVG, drawn by the API's
// renderer (GET /api/v1/links/{code}/qr) for the session's tenant.
func (s *Server) linkQR(w http.ResponseWriter, r *http.Request, sess Session) {
	code := r.PathValue("code")
	format := r.URL.Query().Get("format")
	if format != "svg" {
		format = "png"
	}
	if s.cfg.QR == nil || !link.ValidCodeSyntax(code) {
		s.errorPage(w, r, http.StatusNotFound, "There is no QR code to download here.")
		return
	}
	q := url.Values{"format": {format}}
	if size := r.URL.Query().Get("size"); size != "" {
		q.Set("size", size)
	}
	in, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/api/v1/links/"+code+"/qr?"+q.Encode(), nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	in.RemoteAddr = r.RemoteAddr
	in.Header.Set("Authorization", "Bearer "+qrKeyPrefix+strconv.FormatInt(sess.TenantID, 10))
	rec := httptest.NewRecorder()
	s.cfg.QR.ServeHTTP(rec, in)
	switch rec.Code {
	case http.StatusOK:
	case http.StatusNotFound:
		s.errorPage(w, r, http.StatusNotFound, "There is no such link in this tenant.")
		return
	case http.StatusGone:
		s.errorPage(w, r, http.StatusGone, "That link is deleted: it has no QR code.")
		return
	case http.StatusBadRequest:
		s.errorPage(w, r, http.StatusBadRequest, "That QR code size cannot be drawn (64 to 2,048 pixels, large enough for the code).")
		return
	default:
		s.fail(w, r, fmt.Errorf("qr renderer answered %d", rec.Code))
		return
	}
	h := w.Header()
	for _, name := range []string{"Content-Type", "Content-Length", "ETag", "Content-Security-Policy"} {
		if v := rec.Header().Get(name); v != "" {
			h.Set(name, v)
		}
	}
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=\"%s.%s\"", code, format))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rec.Body.Bytes())
}

// Run purges ended sessions every interval until ctx ends (their rows
// only: an ended session is refused whether or not it was purged).
func (s *Server) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 10 * time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := s.sessions.PurgeSessions(ctx, s.cfg.Now(), s.cfg.IdleTimeout)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("console session purge failed", "err", err)
			} else if n > 0 {
				s.log.Debug("console sessions purged", "count", n)
			}
		}
	}
}
