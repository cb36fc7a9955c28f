package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"

	"github.com/edgelink/edgelink/shared/link"
)

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
	if d := domainParam(r); d != "" {
		q.Set("domain", d)
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
	name := code
	if d, err := link.CanonicalHost(domainParam(r)); err == nil {
		// Two domains may have the code. A canonical host is letters,
		// digits, '.', '-' and ':': nothing to quote.
		name = strings.ReplaceAll(d, ":", "_") + "-" + code
	}
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=\"%s.%s\"", name, format))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rec.Body.Bytes())
}
