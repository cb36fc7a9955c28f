package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/shared/link"
)

// writeProblem answers with status and a problem+json body.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(apiwire.Problem{
		Type:      "about:blank",
		Title:     http.StatusText(status),
		Status:    status,
		Detail:    detail,
		RequestID: requestID(r),
	})
}

// clientError maps a domain error a client can act on to its status and
// message; ok is false for anything else.
func clientError(err error) (status int, detail string, ok bool) {
	switch {
	case errors.Is(err, link.ErrInvalidInput), errors.Is(err, link.ErrInvalidURL), errors.Is(err, link.ErrHost):
		return http.StatusBadRequest, err.Error(), true
	case errors.Is(err, link.ErrDomainTaken):
		// Whose it is stays unsaid: hosts are unique across tenants.
		return http.StatusConflict, "that host is already a domain", true
	case errors.Is(err, link.ErrNotFound):
		return http.StatusNotFound, "no such link", true
	case errors.Is(err, link.ErrDeleted):
		return http.StatusGone, "the link was deleted; its code is never reused", true
	case errors.Is(err, link.ErrCodeTaken):
		return http.StatusConflict, "that code is already taken", true
	case errors.Is(err, link.ErrIdempotencyConflict):
		return http.StatusConflict, "this Idempotency-Key was used with a different request; use a new key for a new request", true
	}
	return 0, "", false
}

// exhaustedDetail answers a create once the namespace's last ID is handed
// out (507: the server cannot store the new link, and retrying will not
// change that).
const exhaustedDetail = "the link ID space is exhausted: no new link can be created until an operator extends the namespace; do not retry"

// writeError is the one place that maps domain errors to statuses. Client
// errors carry their message; anything else is logged with its cause and the
// client sees only the request id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if status, detail, ok := clientError(err); ok {
		writeProblem(w, r, status, detail)
		return
	}
	switch {
	case errors.Is(err, link.ErrUnauthorized):
		w.Header().Set("WWW-Authenticate", `Bearer realm="edgelink"`)
		writeProblem(w, r, http.StatusUnauthorized, "a valid API key is required: Authorization: Bearer <key>")
	case errors.Is(err, link.ErrExhausted):
		// Checked before ErrUnavailable, which wraps it: an exhausted
		// namespace stays exhausted, so no Retry-After invites retries.
		s.log.Error("create refused: ID space exhausted", "request_id", requestID(r), "err", err)
		writeProblem(w, r, http.StatusInsufficientStorage, exhaustedDetail)
	case errors.Is(err, link.ErrUnavailable):
		s.log.Warn("request failed: unavailable", "request_id", requestID(r), "err", err)
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, http.StatusServiceUnavailable, "temporarily unavailable, retry shortly")
	default:
		// The route pattern, not the path: a path holds a link's code.
		s.log.Error("request failed", "request_id", requestID(r), "method", r.Method, "route", r.Pattern, "err", err)
		writeProblem(w, r, http.StatusInternalServerError, "internal error")
	}
}

// itemProblem is a batch item's error. It carries no request id, so a
// replayed batch answers the same bytes.
func (s *Server) itemProblem(err error) apiwire.Problem {
	status, detail, ok := clientError(err)
	switch {
	case ok:
	case errors.Is(err, link.ErrExhausted):
		s.log.Error("batch item refused: ID space exhausted", "err", err)
		status, detail = http.StatusInsufficientStorage, exhaustedDetail
	case errors.Is(err, link.ErrUnavailable):
		s.log.Warn("batch item failed: unavailable", "err", err)
		status, detail = http.StatusServiceUnavailable, "temporarily unavailable, retry this link"
	default:
		s.log.Error("batch item failed", "err", err)
		status, detail = http.StatusInternalServerError, "internal error"
	}
	return apiwire.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
}
