package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/authfail"
	"github.com/edgelink/edgelink/shared/link"
)

// MaxFormBytes bounds a signed-in browser's form post: a link's form with
// link.MaxRules rules, each target at its 4 KB bound (percent-encoded in
// the post, up to three times that), and every other field at its bound
// fits with room to spare. The sign-in form, which anyone may post, has a
// bound of its own (maxSignInBytes).
const MaxFormBytes = 512 << 10

// maxSignInBytes bounds the sign-in form: a key and a token.
const maxSignInBytes = 16 << 10

// touchEvery is how stale a session's last request may be recorded: a
// write per minute of activity, not per request, and still far below the
// idle timeout.
const touchEvery = time.Minute

// signInCookie carries the sign-in form's CSRF token (double submit): the
// form's hidden field must equal it, so another site cannot sign a browser
// in to an attacker's tenant.
const signInCookie = "elk_console_signin"

func (s *Server) sessionCookie() string {
	// __Host- makes the browser refuse the cookie unless it is Secure,
	// host-only and for path /: no subdomain can set or shadow it.
	if s.secure {
		return "__Host-elk_console"
	}
	return "elk_console"
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, expires time.Time) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteStrictMode}
	if value == "" {
		c.MaxAge = -1
	} else if !expires.IsZero() {
		c.Expires = expires
	}
	http.SetCookie(w, c)
}

func randomString() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// session is the request's session, if its cookie names a live one. A
// store failure is not a session: the caller shows sign-in, and the
// failure is logged.
func (s *Server) session(r *http.Request) (Session, string, bool) {
	c, err := r.Cookie(s.sessionCookie())
	if err != nil || c.Value == "" {
		return Session{}, "", false
	}
	sess, err := s.sessions.Session(r.Context(), c.Value, s.cfg.Now(), s.cfg.IdleTimeout)
	if err != nil {
		if !errors.Is(err, ErrNoSession) {
			s.log.Warn("console session lookup failed", "request_id", requestID(r), "err", err)
		}
		return Session{}, "", false
	}
	return sess, c.Value, true
}

// handler is a page of a signed-in browser.
type handler func(w http.ResponseWriter, r *http.Request, sess Session)

// authed runs h for a request with a live session, after checking, for a
// form post, its size and its CSRF token. Without a session the browser is
// sent to sign-in, having done nothing; a session whose key was revoked has
// none from its next request on.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(s.sessionCookie())
		if err != nil || c.Value == "" {
			s.toSignIn(w, r, "")
			return
		}
		now := s.cfg.Now()
		sess, err := s.sessions.Session(r.Context(), c.Value, now, s.cfg.IdleTimeout)
		switch {
		case errors.Is(err, ErrNoSession):
			s.setCookie(w, s.sessionCookie(), "", time.Time{})
			s.toSignIn(w, r, "Your session has ended: it expired, you signed out elsewhere or its key was revoked. Sign in again.")
			return
		case err != nil:
			s.fail(w, r, err)
			return
		}
		if r.Method == http.MethodPost {
			if !s.readForm(w, r, MaxFormBytes) {
				return
			}
			if !sameToken(formToken(r), sess.CSRF) {
				s.errorPage(w, r, http.StatusForbidden, "This form has expired or did not come from the console (its CSRF token is missing or wrong). Reload the page and try again.")
				return
			}
		}
		if now.Sub(sess.LastSeen) >= touchEvery {
			if err := s.sessions.TouchSession(r.Context(), c.Value, now); err != nil {
				s.log.Warn("console session touch failed", "request_id", requestID(r), "err", err)
			}
		}
		h(w, r, sess)
	}
}

// readForm parses a form post of at most limit bytes, answering the
// error page itself when it cannot.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request, limit int64) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.errorPage(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %d KiB: nothing was saved. Go back to it, shorten what is longest, and send it again.", limit>>10))
			return false
		}
		s.errorPage(w, r, http.StatusBadRequest, "The form could not be read.")
		return false
	}
	return true
}

// formToken is the CSRF token a post carries: the form's field, or the
// header htmx sends (hx-headers on the body).
func formToken(r *http.Request) string {
	if t := r.PostForm.Get("csrf"); t != "" {
		return t
	}
	return r.Header.Get("X-CSRF-Token")
}

func sameToken(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// toSignIn sends the browser to sign-in, saying why when there is a
// reason; htmx is told to load the page whole.
func (s *Server) toSignIn(w http.ResponseWriter, r *http.Request, why string) {
	to := Prefix + "sign-in"
	if why != "" {
		to += "?ended=1"
	}
	if r.Header.Get("HX-Request") == "true" {
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

type signInData struct {
	CSRF    string
	Message string
	Ended   bool
}

func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.session(r); ok {
		http.Redirect(w, r, Prefix+"links", http.StatusSeeOther)
		return
	}
	s.renderSignIn(w, r, http.StatusOK, "", r.URL.Query().Get("ended") == "1")
}

func (s *Server) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string, ended bool) {
	token := randomString()
	s.setCookie(w, signInCookie, token, time.Time{})
	s.render(w, r, status, "signin", page{Title: "Sign in", Data: signInData{CSRF: token, Message: msg, Ended: ended}})
}

// signIn exchanges an API key, posted in the form's body (never a URL),
// for a session. Failures spend the client's budget; past it the key is
// not looked up at all.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	client := authfail.Client(r)
	if wait, blocked := s.fails.Blocked(client); blocked {
		w.Header().Set("Retry-After", fmt.Sprint(max(1, int64(math.Ceil(wait.Seconds())))))
		s.renderSignIn(w, r, http.StatusTooManyRequests, "Too many failed sign-ins from this address. Wait a little and try again.", false)
		return
	}
	if !s.readForm(w, r, maxSignInBytes) {
		return
	}
	c, err := r.Cookie(signInCookie)
	if err != nil || !sameToken(r.PostForm.Get("csrf"), c.Value) {
		s.errorPage(w, r, http.StatusForbidden, "This sign-in form has expired or did not come from the console. Reload the page and try again.")
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if key == "" {
		s.fails.Fail(client)
		s.renderSignIn(w, r, http.StatusUnauthorized, "Enter an API key.", false)
		return
	}
	now := s.cfg.Now()
	sess, token, err := s.sessions.OpenSession(r.Context(), key, now, now.Add(s.cfg.MaxLifetime))
	if errors.Is(err, link.ErrUnauthorized) {
		s.fails.Fail(client)
		s.renderSignIn(w, r, http.StatusUnauthorized, "That API key is not valid, or it was revoked.", false)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.setCookie(w, signInCookie, "", time.Time{})
	s.setCookie(w, s.sessionCookie(), token, sess.ExpiresAt)
	// The tenant and key ids, never the key.
	s.log.Info("console sign-in", "request_id", requestID(r), "tenant", sess.TenantID, "key_id", sess.KeyID)
	http.Redirect(w, r, Prefix+"links", http.StatusSeeOther)
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request, sess Session) {
	c, _ := r.Cookie(s.sessionCookie())
	if err := s.sessions.CloseSession(r.Context(), c.Value); err != nil {
		s.fail(w, r, err)
		return
	}
	s.setCookie(w, s.sessionCookie(), "", time.Time{})
	http.Redirect(w, r, Prefix+"sign-in", http.StatusSeeOther)
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
