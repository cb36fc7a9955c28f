package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// createBody is the JSON a creator posts; createShape is what decodeJSON
// lets into it, and how.
type createBody struct {
	Domain       string   `json:"domain"`
	URL          *string  `json:"url"`
	Code         string   `json:"code"`
	ExpiresAt    *string  `json:"expires_at"`
	RedirectType int      `json:"redirect_type"`
	Namespace    string   `json:"namespace"`
	Title        string   `json:"title"`
	Tags         []string `json:"tags"`
	// Rules, Password and MaxClicks: rules.go.
	Rules     []ruleBody `json:"rules"`
	Password  *string    `json:"password"`
	MaxClicks *int64     `json:"max_clicks"`
}

var createShape = jsonObject(
	into(jsonField("domain", jsonString), func(b *createBody, v jsonValue) { b.Domain = v.str }),
	into(jsonField("url", jsonString), func(b *createBody, v jsonValue) { b.URL = ptr(v.str) }),
	into(jsonField("code", jsonString), func(b *createBody, v jsonValue) { b.Code = v.str }),
	into(jsonField("expires_at", jsonStringOrNull), func(b *createBody, v jsonValue) {
		b.ExpiresAt = nil
		if !v.null {
			b.ExpiresAt = ptr(v.str)
		}
	}),
	into(jsonField("redirect_type", jsonInteger), func(b *createBody, v jsonValue) { b.RedirectType = int(v.num) }),
	into(jsonField("namespace", jsonString), func(b *createBody, v jsonValue) { b.Namespace = v.str }),
	into(jsonField("title", jsonString), func(b *createBody, v jsonValue) { b.Title = v.str }),
	into(jsonField("tags", jsonArray(jsonString)), func(b *createBody, v jsonValue) { b.Tags = append(b.Tags, v.str) }),
	each(jsonField("rules", jsonArray(ruleShape)), func(b *createBody) any {
		b.Rules = append(b.Rules, ruleBody{})
		return &b.Rules[len(b.Rules)-1]
	}),
	into(jsonField("password", jsonString), func(b *createBody, v jsonValue) { b.Password = ptr(v.str) }),
	into(jsonField("max_clicks", jsonInteger), func(b *createBody, v jsonValue) { b.MaxClicks = ptr(v.num) }),
)

// idempotencyKey reads the Idempotency-Key header: 1 to 255 printable ASCII
// characters (0x20 to 0x7e, so spaces too; HTTP drops them at either end),
// compared byte for byte, or absent. A draft-style sf-string such as
// "abc" is a key like any other, quotes included.
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
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", fmt.Errorf("%w: Idempotency-Key must be printable ASCII (0x20 to 0x7e, space included), not byte 0x%02x at %d", link.ErrInvalidInput, k[i], i)
		}
	}
	return k, nil
}

// request is the create the body asks for. Its domain, "" (or left out)
// for the platform's, is canonical once read.
func (s *Server) request(in *createBody) (links.CreateRequest, error) {
	if in.URL == nil {
		return links.CreateRequest{}, fmt.Errorf("%w: url is required", link.ErrInvalidInput)
	}
	var domain string
	if in.Domain != "" {
		var err error
		if domain, err = s.linkDomain("domain", in.Domain); err != nil {
			return links.CreateRequest{}, err
		}
	}
	req := links.CreateRequest{Domain: domain, URL: *in.URL, Code: in.Code, RedirectType: link.RedirectType(in.RedirectType), Namespace: in.Namespace,
		Title: in.Title, Tags: in.Tags}
	if in.ExpiresAt != nil {
		t, err := parseTime("expires_at", *in.ExpiresAt)
		if err != nil {
			return req, err
		}
		req.ExpiresAt = t
	}
	if err := createExtras(in, &req); err != nil {
		return req, err
	}
	return req, nil
}

func (s *Server) createLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	var in createBody
	if err := decodeJSON(w, r, &in, createShape, MaxBodyBytes, "application/json"); err != nil {
		writeBodyError(w, r, err)
		return
	}
	req, err := s.request(&in)
	if err == nil {
		req.IdempotencyKey, err = idempotencyKey(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.links.Create(r.Context(), tenant, req)
	if err != nil {
		// Only the domain can be missing when a link is being made.
		if errors.Is(err, link.ErrNotFound) {
			p := unknownDomain(req.Domain)
			writeProblem(w, r, p.Status, p.Detail)
			return
		}
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", s.linkPath(c.Link))
	if c.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	s.writeBody(w, http.StatusCreated, func(b []byte) []byte { return s.appendCreated(b, c.Link) })
}

type batchBody struct {
	Links []createBody `json:"links"`
}

var batchShape = jsonObject(each(jsonField("links", jsonArray(createShape)), func(b *batchBody) any {
	b.Links = append(b.Links, createBody{})
	return &b.Links[len(b.Links)-1]
}))

func (s *Server) createBatch(w http.ResponseWriter, r *http.Request, tenant int64) {
	var in batchBody
	if err := decodeJSON(w, r, &in, batchShape, MaxBatchBodyBytes, "application/json"); err != nil {
		writeBodyError(w, r, err)
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
		if reqs[i], err = s.request(&in.Links[i]); err != nil {
			reqs[i] = links.CreateRequest{Rejected: err}
		}
	}
	res, err := s.links.CreateBatch(r.Context(), tenant, key, reqs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	met := s.met
	if res.Replayed {
		met = nil // counted when first answered
	}
	problems := make([]*apiwire.Problem, len(res.Items))
	created := 0
	for i, it := range res.Items {
		if it.Err == nil {
			created++
			continue
		}
		p := s.itemProblem(it.Err)
		if errors.Is(it.Err, link.ErrNotFound) {
			p = unknownDomain(reqs[i].Domain)
		}
		met.batchItems(p.Status, 1)
		problems[i] = &p
	}
	met.batchItems(http.StatusCreated, created)
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	s.writeBody(w, http.StatusOK, func(b []byte) []byte { return s.appendBatch(b, res, problems, created) })
}

func (s *Server) getLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	domain, _, err := s.linkQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := s.links.Get(r.Context(), tenant, domain, r.PathValue("code"))
	if err != nil {
		s.writeLinkError(w, r, domain, err)
		return
	}
	now := s.cfg.Now()
	s.writeBody(w, http.StatusOK, func(b []byte) []byte { return s.appendLink(b, l, now) })
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
	// Not r.URL.Query(), which drops a malformed pair without a word: a
	// filter lost that way would list more than was asked for.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("%w: the query string is malformed: %v", link.ErrInvalidInput, err))
		return
	}
	// One instant judges both which links are listed and the state each
	// reads, so a link expiring meanwhile cannot be listed as active and
	// read expired.
	lr := links.ListRequest{Limit: 50, Now: s.cfg.Now()}
	for name := range q {
		switch name {
		case "limit", "cursor", "status", "namespace", "created_after", "created_before", "tag", "tag_mode", "q", "domain":
		default:
			s.writeError(w, r, fmt.Errorf("%w: unknown query parameter %q", link.ErrInvalidInput, name))
			return
		}
		if name != "tag" && len(q[name]) > 1 {
			s.writeError(w, r, fmt.Errorf("%w: send %s once", link.ErrInvalidInput, name))
			return
		}
	}
	// tag may repeat, and each may list tags with commas (tag=a,b&tag=c):
	// a tag holds no comma.
	for _, v := range q["tag"] {
		lr.Tags = append(lr.Tags, strings.Split(v, ",")...)
	}
	if v, ok := q["domain"]; ok {
		// The platform's host too: "" would list every domain.
		if lr.Domain, err = canonicalDomain("domain", v[0]); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	lr.TagMode, lr.Search = links.TagMode(q.Get("tag_mode")), q.Get("q")
	if _, sent := q["q"]; sent && lr.Search == "" {
		s.writeError(w, r, fmt.Errorf("%w: q is empty; leave it out to list without searching", link.ErrInvalidInput))
		return
	}
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
			if *tp.dst, err = parseTime(tp.name, v); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	ls, next, err := s.links.List(r.Context(), tenant, lr)
	if err != nil {
		// Only the domain filter can name nothing.
		if errors.Is(err, link.ErrNotFound) {
			writeProblem(w, r, http.StatusNotFound, unknownDomain(lr.Domain).Detail)
			return
		}
		s.writeError(w, r, err)
		return
	}
	s.writeBody(w, http.StatusOK, func(b []byte) []byte { return s.appendList(b, ls, next, lr.Now) })
}

// patchBody is a JSON merge patch of a link: absent fields are kept;
// expires_at, title, rules, password and max_clicks null clear them (no
// other field may be null), and rules [] clears the rules too.
type patchBody struct {
	URL          *string         `json:"url"`
	RedirectType *int            `json:"redirect_type"`
	ExpiresAt    json.RawMessage `json:"expires_at"`
	Status       *string         `json:"status"`
	Title        json.RawMessage `json:"title"`
	// Rules, password and max_clicks (rules.go): each told sent or not,
	// null or not.
	Rules     sentRules         `json:"rules"`
	Password  sentValue[string] `json:"password"`
	MaxClicks sentValue[int64]  `json:"max_clicks"`
}

var patchShape = jsonObject(
	into(jsonField("url", jsonString), func(b *patchBody, v jsonValue) { b.URL = ptr(v.str) }),
	into(jsonField("redirect_type", jsonInteger), func(b *patchBody, v jsonValue) { b.RedirectType = ptr(int(v.num)) }),
	into(jsonField("expires_at", jsonStringOrNull), func(b *patchBody, v jsonValue) { b.ExpiresAt = v.raw }),
	into(jsonField("status", jsonString), func(b *patchBody, v jsonValue) { b.Status = ptr(v.str) }),
	into(jsonField("title", jsonStringOrNull), func(b *patchBody, v jsonValue) { b.Title = v.raw }),
	present(each(jsonField("rules", jsonArrayOrNull(ruleShape)), func(b *patchBody) any {
		b.Rules.Rules = append(b.Rules.Rules, ruleBody{})
		return &b.Rules.Rules[len(b.Rules.Rules)-1]
	}), func(b *patchBody) { b.Rules.Sent = true }),
	into(jsonField("password", jsonStringOrNull), func(b *patchBody, v jsonValue) {
		b.Password = sentValue[string]{Sent: true, Null: v.null, V: v.str}
	}),
	into(jsonField("max_clicks", jsonIntegerOrNull), func(b *patchBody, v jsonValue) {
		b.MaxClicks = sentValue[int64]{Sent: true, Null: v.null, V: v.num}
	}),
)

func (s *Server) patchLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	domain, _, err := s.linkQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in patchBody
	if err := decodeJSON(w, r, &in, patchShape, MaxBodyBytes, "application/json", "application/merge-patch+json"); err != nil {
		writeBodyError(w, r, err)
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
			err := json.Unmarshal(in.ExpiresAt, &str) // a string: patchShape says so
			if err == nil {
				t, err = parseTime("expires_at", str)
			}
			if err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		u.ExpiresAt = &t
	}
	if in.Title != nil {
		var title string // null: none
		if !bytes.Equal(in.Title, []byte("null")) {
			if err := json.Unmarshal(in.Title, &title); err != nil { // a string: patchShape says so
				s.writeError(w, r, fmt.Errorf("%w: title must be a string or null", link.ErrInvalidInput))
				return
			}
		}
		u.Title = &title
	}
	if err := patchExtras(&in, &u); err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := s.links.Update(r.Context(), tenant, domain, r.PathValue("code"), u)
	if err != nil {
		s.writeLinkError(w, r, domain, err)
		return
	}
	now := s.cfg.Now()
	s.writeBody(w, http.StatusOK, func(b []byte) []byte { return s.appendLink(b, l, now) })
}

func (s *Server) deleteLink(w http.ResponseWriter, r *http.Request, tenant int64) {
	domain, _, err := s.linkQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	_, err = s.links.Delete(r.Context(), tenant, domain, r.PathValue("code"))
	if err != nil && !errors.Is(err, link.ErrDeleted) {
		s.writeLinkError(w, r, domain, err)
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
