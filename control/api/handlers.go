package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// createBody is the JSON a creator posts.
type createBody struct {
	URL          *string `json:"url"`
	Code         string  `json:"code"`
	ExpiresAt    *string `json:"expires_at"`
	RedirectType int     `json:"redirect_type"`
	Namespace    string  `json:"namespace"`
}

// body renders a link. It depends only on the link and the public URL, so
// a replayed create renders byte for byte what the original did.
func (s *Server) body(l *link.Link) apiwire.Link {
	b := apiwire.Link{
		Code: l.Code, ShortURL: s.public + "/" + l.Code, URL: l.URL, URLOriginal: l.URLOriginal,
		RedirectType: int(l.RedirectType), Status: string(l.Status), Namespace: l.Namespace,
		Version: l.Version, CreatedAt: l.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: l.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if !l.ExpiresAt.IsZero() {
		e := l.ExpiresAt.UTC().Format(time.RFC3339Nano)
		b.ExpiresAt = &e
	}
	return b
}

// idempotencyKey reads the Idempotency-Key header: 1 to 255 printable ASCII
// characters, or absent.
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", nil
	}
	k := vals[0]
	if len(vals) > 1 || k == "" || len(k) > 255 {
		return "", fmt.Errorf("%w: send one Idempotency-Key of 1 to 255 characters", link.ErrInvalidInput)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", fmt.Errorf("%w: Idempotency-Key must be printable ASCII without spaces", link.ErrInvalidInput)
		}
	}
	return k, nil
}

func (in *createBody) request() (links.CreateRequest, error) {
	if in.URL == nil {
		return links.CreateRequest{}, fmt.Errorf("%w: url is required", link.ErrInvalidInput)
	}
	req := links.CreateRequest{URL: *in.URL, Code: in.Code, RedirectType: link.RedirectType(in.RedirectType), Namespace: in.Namespace}
	if in.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *in.ExpiresAt)
		if err != nil {
			return req, fmt.Errorf("%w: expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z", link.ErrInvalidInput)
		}
		req.ExpiresAt = t
	}
	return req, nil
}

func (s *Server) createLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	var in createBody
	if err := decodeJSON(w, r, &in, MaxBodyBytes); err != nil {
		writeProblem(w, r, statusOf(err), err.Error())
		return
	}
	req, err := in.request()
	if err == nil {
		req.IdempotencyKey, err = idempotencyKey(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.links.Create(r.Context(), tenant, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/links/"+c.Link.Code)
	if c.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, s.body(c.Link))
}

type batchBody struct {
	Links []createBody `json:"links"`
}

type batchAnswer struct {
	Created int                   `json:"created"`
	Failed  int                   `json:"failed"`
	Results []apiwire.BatchResult `json:"results"`
}

func (s *Server) createBatch(w http.ResponseWriter, r *http.Request, tenant int64) {
	var in batchBody
	if err := decodeJSON(w, r, &in, MaxBatchBodyBytes); err != nil {
		writeProblem(w, r, statusOf(err), err.Error())
		return
	}
	if len(in.Links) == 0 || len(in.Links) > links.MaxBatch {
		writeProblem(w, r, http.StatusBadRequest, fmt.Sprintf("links must hold 1 to %d links, not %d", links.MaxBatch, len(in.Links)))
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reqs := make([]links.CreateRequest, len(in.Links))
	for i := range in.Links {
		var err error
		if reqs[i], err = in.Links[i].request(); err != nil {
			reqs[i] = links.CreateRequest{Rejected: err}
		}
	}
	res, err := s.links.CreateBatch(r.Context(), tenant, key, reqs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := batchAnswer{Results: make([]apiwire.BatchResult, len(res.Items))}
	met := s.met
	if res.Replayed {
		met = nil // counted when first answered
	}
	for i, it := range res.Items {
		out.Results[i].Index = i
		if it.Err == nil {
			met.batchItem(http.StatusCreated)
			b := s.body(it.Link)
			out.Results[i].Status, out.Results[i].Link = http.StatusCreated, &b
			out.Created++
			continue
		}
		p := s.itemProblem(it.Err)
		met.batchItem(p.Status)
		out.Results[i].Status, out.Results[i].Error = p.Status, &p
		out.Failed++
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	l, err := s.links.Get(r.Context(), tenant, r.PathValue("code"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.body(l))
}

type listAnswer struct {
	Links      []apiwire.Link `json:"links"`
	NextCursor *string        `json:"next_cursor"`
}

// Cursors are opaque to clients; inside they are the last ID of the page.
const cursorPrefix = "c1:"

func encodeCursor(id uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatUint(id, 10)))
}

func decodeCursor(c string) (uint64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), cursorPrefix); ok {
			if id, err := strconv.ParseUint(rest, 10, 63); err == nil && id > 0 {
				return id, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: cursor is not one this API returned", link.ErrInvalidInput)
}

func (s *Server) listLinks(w http.ResponseWriter, r *http.Request, tenant int64) {
	q := r.URL.Query()
	var lr links.ListRequest
	lr.Limit = 50
	for name := range q {
		switch name {
		case "limit", "cursor", "status", "namespace", "created_after", "created_before":
		default:
			s.writeError(w, r, fmt.Errorf("%w: unknown query parameter %q", link.ErrInvalidInput, name))
			return
		}
	}
	var err error
	if v := q.Get("limit"); v != "" {
		if lr.Limit, err = strconv.Atoi(v); err != nil {
			s.writeError(w, r, fmt.Errorf("%w: limit must be a number from 1 to %d", link.ErrInvalidInput, links.MaxPage))
			return
		}
	}
	if v := q.Get("cursor"); v != "" {
		if lr.Before, err = decodeCursor(v); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	lr.Status, lr.Namespace = link.Status(q.Get("status")), q.Get("namespace")
	for _, tp := range []struct {
		name string
		dst  *time.Time
	}{{"created_after", &lr.CreatedAfter}, {"created_before", &lr.CreatedBefore}} {
		if v := q.Get(tp.name); v != "" {
			if *tp.dst, err = time.Parse(time.RFC3339, v); err != nil {
				s.writeError(w, r, fmt.Errorf("%w: %s must be an RFC 3339 time", link.ErrInvalidInput, tp.name))
				return
			}
		}
	}
	ls, next, err := s.links.List(r.Context(), tenant, lr)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listAnswer{Links: make([]apiwire.Link, len(ls))}
	for i, l := range ls {
		out.Links[i] = s.body(l)
	}
	if next != 0 {
		c := encodeCursor(next)
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
}

// patchBody is a JSON merge patch of a link: absent fields are kept, and
// expires_at null clears the expiry.
type patchBody struct {
	URL          *string         `json:"url"`
	RedirectType *int            `json:"redirect_type"`
	ExpiresAt    json.RawMessage `json:"expires_at"`
	Status       *string         `json:"status"`
}

func (s *Server) patchLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	var in patchBody
	if err := decodeJSON(w, r, &in, MaxBodyBytes); err != nil {
		writeProblem(w, r, statusOf(err), err.Error())
		return
	}
	var u links.Update
	u.URL = in.URL
	if in.RedirectType != nil {
		rt := link.RedirectType(*in.RedirectType)
		u.RedirectType = &rt
	}
	if in.Status != nil {
		st := link.Status(*in.Status)
		u.Status = &st
	}
	if in.ExpiresAt != nil {
		var t time.Time
		if !bytes.Equal(in.ExpiresAt, []byte("null")) {
			var str string
			err := json.Unmarshal(in.ExpiresAt, &str)
			if err == nil {
				t, err = time.Parse(time.RFC3339, str)
			}
			if err != nil {
				s.writeError(w, r, fmt.Errorf("%w: expires_at must be an RFC 3339 time or null", link.ErrInvalidInput))
				return
			}
			t = t.Truncate(time.Microsecond)
		}
		u.ExpiresAt = &t
	}
	l, err := s.links.Update(r.Context(), tenant, r.PathValue("code"), u)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.body(l))
}

func (s *Server) deleteLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	_, err := s.links.Delete(r.Context(), tenant, r.PathValue("code"))
	if err != nil && !errors.Is(err, link.ErrDeleted) {
		s.writeError(w, r, err)
		return
	}
	// Deleting a deleted link succeeds without a change: DELETE is
	// idempotent.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func statusOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return http.StatusBadRequest
}

// decodeJSON reads exactly one JSON object with only known fields from a
// body of at most limit bytes.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	ct := r.Header.Get("Content-Type")
	if ct != "" && !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "application/merge-patch+json") {
		return &statusError{http.StatusUnsupportedMediaType, "Content-Type must be application/json"}
	}
	if r.ContentLength > limit {
		return &statusError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", limit)}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &statusError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", limit)}
		}
		if errors.Is(err, io.EOF) {
			return &statusError{http.StatusBadRequest, "body is empty; send a JSON object"}
		}
		return &statusError{http.StatusBadRequest, "malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &statusError{http.StatusBadRequest, "malformed JSON: data after the object"}
	}
	return nil
}
