package console

import (
	"errors"
	"net/http"
	"strconv"
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
