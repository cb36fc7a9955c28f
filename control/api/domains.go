package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// Domains is the domain management /api/v1/domains drives
// (control/domains.Service). Its tenantID 0 is the operator, who may change
// any domain: the API only ever passes an authenticated tenant's ID.
type Domains interface {
	Create(ctx context.Context, tenantID int64, in domains.Input) (link.Domain, error)
	Update(ctx context.Context, tenantID int64, host string, p domains.Patch) (link.Domain, error)
	Remove(ctx context.Context, tenantID int64, host string) (link.Domain, error)
	List(ctx context.Context, tenantID int64) ([]link.Domain, error)
	Get(ctx context.Context, tenantID int64, host string) (link.Domain, error)
}

// shortURLs is links.ShortURLs with the API's JSON encoding of one.
type shortURLs struct{ links.ShortURLs }

// domainOf is the host of l's domain.
func (u *shortURLs) domainOf(l *links.Link) string { return u.HostOf(l.DomainID, l.Domain) }

// appendEscaped appends l's short URL, escaped for a JSON string, without
// building it first.
func (u *shortURLs) appendEscaped(b []byte, l *links.Link) []byte {
	// Escaped piece by piece, as the whole would be: each piece is
	// valid UTF-8 on its own, and '/' is no escape's part.
	if l.DomainID == link.DefaultDomain {
		b = appendEscaped(b, u.Public)
	} else {
		b = appendEscaped(b, u.Scheme)
		b = appendEscaped(b, links.Bracketed(l.Domain))
		b = appendEscaped(b, u.Port)
	}
	b = append(b, '/')
	return appendEscaped(b, l.Code)
}

// of is l's short URL.
func (u *shortURLs) of(l *links.Link) string { return u.Of(l.DomainID, l.Domain, l.Code) }

// canonicalDomain is v, a domain's host as a client sent it in field,
// in its canonical spelling (link.CanonicalHost: lower case, punycode, no
// port or trailing dot), or link.ErrInvalidInput saying why it is none.
func canonicalDomain(field, v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("%w: %s is empty; leave it out for the platform's domain", link.ErrInvalidInput, field)
	}
	h, err := link.CanonicalHost(v)
	if err != nil {
		return "", fmt.Errorf("%w: %s %.100q: %w", link.ErrInvalidInput, field, v, err)
	}
	return h, nil
}

// linkDomain is the domain a link route addresses, as the links service
// takes it: "" for the platform's (the parameter left out, or the
// platform's own host), else a canonical host.
func (s *Server) linkDomain(field, v string) (string, error) {
	h, err := canonicalDomain(field, v)
	if err != nil || h == s.short.Host {
		return "", err
	}
	return h, nil
}

// linkQuery reads the query of a /api/v1/links/{code}… route (see
// checkLinkQuery) and returns the domain it names as linkDomain does.
func (s *Server) linkQuery(r *http.Request, extra ...string) (domain string, q url.Values, err error) {
	if q, err = checkLinkQuery(r.URL.RawQuery, extra); err != nil {
		return "", nil, err
	}
	if v, ok := q["domain"]; ok {
		if domain, err = s.linkDomain("domain", v[0]); err != nil {
			return "", nil, err
		}
	}
	return domain, q, nil
}

// checkLinkQuery parses raw, the query of a link route: domain (the link's
// domain; absent for the platform's) and the names in extra, each at most
// once, nothing else. A parameter the route does not know is refused
// rather than ignored: a misspelt domain would otherwise address the link
// with that code on the platform's domain.
func checkLinkQuery(raw string, extra []string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the query string is malformed: %v", link.ErrInvalidInput, err)
	}
	for name, vals := range q {
		if name != "domain" && !contains(extra, name) {
			known := "domain"
			if len(extra) > 0 {
				known = strings.Join(extra, ", ") + " and domain"
			}
			return nil, fmt.Errorf("%w: unknown query parameter %.40q; the parameters are %s", link.ErrInvalidInput, name, known)
		}
		if len(vals) > 1 {
			return nil, fmt.Errorf("%w: send %s once, not %d times", link.ErrInvalidInput, name, len(vals))
		}
	}
	return q, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// linkPath is the API path of l, as Location names it.
func (s *Server) linkPath(l *links.Link) string {
	p := "/api/v1/links/" + url.PathEscape(l.Code)
	if l.DomainID != link.DefaultDomain {
		p += "?domain=" + url.QueryEscape(l.Domain)
	}
	return p
}

// unknownDomain is a create's answer for a domain the tenant may not use:
// its own and the platform's are all it may, and another tenant's host
// is answered exactly as one nobody has.
func unknownDomain(host string) apiwire.Problem {
	return apiwire.Problem{Type: "about:blank", Title: http.StatusText(http.StatusNotFound), Status: http.StatusNotFound,
		Detail: fmt.Sprintf("no domain %.260q is yours to use; GET /api/v1/domains lists the ones you may", host)}
}

// writeLinkError answers the error of a link route on domain: a link
// missing from a domain the request named says which domain it looked on
// (the client's own words; an unknown or another tenant's domain answers
// exactly so too).
func (s *Server) writeLinkError(w http.ResponseWriter, r *http.Request, domain string, err error) {
	if domain != "" && errors.Is(err, link.ErrNotFound) {
		writeProblem(w, r, http.StatusNotFound, fmt.Sprintf("no such link on %.260s", domain))
		return
	}
	s.writeError(w, r, err)
}

// domainBody is a new domain as a tenant posts it.
type domainBody struct {
	Host             *string `json:"host"`
	RootRedirect     string  `json:"root_redirect"`
	NotFoundRedirect string  `json:"not_found_redirect"`
	Robots           string  `json:"robots"`
	CodeMode         string  `json:"code_mode"`
}

var domainShape = jsonObject(
	into(jsonField("host", jsonString), func(b *domainBody, v jsonValue) { b.Host = ptr(v.str) }),
	into(jsonField("root_redirect", jsonStringOrNull), func(b *domainBody, v jsonValue) { b.RootRedirect = v.str }),
	into(jsonField("not_found_redirect", jsonStringOrNull), func(b *domainBody, v jsonValue) { b.NotFoundRedirect = v.str }),
	into(jsonField("robots", jsonStringOrNull), func(b *domainBody, v jsonValue) { b.Robots = v.str }),
	into(jsonField("code_mode", jsonString), func(b *domainBody, v jsonValue) { b.CodeMode = v.str }),
)

// domainPatchBody is a JSON merge patch of a domain's settings: an absent
// field is kept, null or "" clears it.
type domainPatchBody struct {
	RootRedirect     *string `json:"root_redirect"`
	NotFoundRedirect *string `json:"not_found_redirect"`
	Robots           *string `json:"robots"`
}

var domainPatchShape = jsonObject(
	into(jsonField("root_redirect", jsonStringOrNull), func(b *domainPatchBody, v jsonValue) { b.RootRedirect = ptr(v.str) }),
	into(jsonField("not_found_redirect", jsonStringOrNull), func(b *domainPatchBody, v jsonValue) { b.NotFoundRedirect = ptr(v.str) }),
	into(jsonField("robots", jsonStringOrNull), func(b *domainPatchBody, v jsonValue) { b.Robots = ptr(v.str) }),
)

// wireDomain is d as the API answers it.
func wireDomain(d link.Domain) apiwire.Domain {
	w := apiwire.Domain{Host: d.Host, Platform: d.ID == link.DefaultDomain, CodeMode: string(d.CodeMode), Status: string(d.Status), Version: d.Version}
	for _, f := range []struct {
		v   string
		dst **string
	}{{d.RootRedirect, &w.RootRedirect}, {d.NotFoundRedirect, &w.NotFoundRedirect}, {d.Robots, &w.Robots}} {
		if f.v != "" {
			*f.dst = ptr(f.v)
		}
	}
	return w
}

var errNoDomains = errors.New("domains are not configured on this server")

// domains is the domain service a domains route may use for tenant; when
// there is none it answers the request and ok is false.
func (s *Server) domains(w http.ResponseWriter, r *http.Request, tenant int64) (Domains, bool) {
	switch {
	case s.cfg.Domains == nil:
		writeProblem(w, r, http.StatusNotFound, errNoDomains.Error())
		return nil, false
	case tenant <= 0:
		// 0 is the operator to the domain service: never a key's holder.
		s.writeError(w, r, fmt.Errorf("domains: tenant id %d from authentication", tenant))
		return nil, false
	}
	return s.cfg.Domains, true
}

// writeDomainError answers a domain service's error: a domain the tenant
// may not see is 404 exactly as one that does not exist.
func (s *Server) writeDomainError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, link.ErrNotFound) {
		writeProblem(w, r, http.StatusNotFound, "no such domain")
		return
	}
	s.writeError(w, r, err)
}

// hostParam is the {host} of a domains route, canonical.
func hostParam(r *http.Request) (string, error) { return canonicalDomain("host", r.PathValue("host")) }

func (s *Server) listDomains(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.domains(w, r, tenant)
	if !ok {
		return
	}
	if r.URL.RawQuery != "" {
		s.writeError(w, r, fmt.Errorf("%w: GET /api/v1/domains takes no query parameters", link.ErrInvalidInput))
		return
	}
	ds, err := svc.List(r.Context(), tenant)
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	out := apiwire.DomainList{Domains: make([]apiwire.Domain, len(ds))}
	for i, d := range ds {
		out.Domains[i] = wireDomain(d)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createDomain(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.domains(w, r, tenant)
	if !ok {
		return
	}
	var in domainBody
	if err := decodeJSON(w, r, &in, domainShape, MaxBodyBytes, "application/json"); err != nil {
		writeBodyError(w, r, err)
		return
	}
	if in.Host == nil {
		s.writeError(w, r, fmt.Errorf("%w: host is required", link.ErrInvalidInput))
		return
	}
	host, err := canonicalDomain("host", *in.Host)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	mode := link.CodeMode(in.CodeMode)
	if in.CodeMode != "" && !mode.Valid() {
		s.writeError(w, r, fmt.Errorf("%w: code_mode must be ff1 or sequential, not %.20q", link.ErrInvalidInput, in.CodeMode))
		return
	}
	d, err := svc.Create(r.Context(), tenant, domains.Input{Host: host, RootRedirect: in.RootRedirect,
		NotFoundRedirect: in.NotFoundRedirect, Robots: in.Robots, CodeMode: mode})
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/domains/"+url.PathEscape(d.Host))
	writeJSON(w, http.StatusCreated, wireDomain(d))
}

func (s *Server) getDomain(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.domains(w, r, tenant)
	if !ok {
		return
	}
	host, err := hostParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := svc.Get(r.Context(), tenant, host)
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireDomain(d))
}

func (s *Server) patchDomain(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.domains(w, r, tenant)
	if !ok {
		return
	}
	var in domainPatchBody
	if err := decodeJSON(w, r, &in, domainPatchShape, MaxBodyBytes, "application/json", "application/merge-patch+json"); err != nil {
		writeBodyError(w, r, err)
		return
	}
	if in.RootRedirect == nil && in.NotFoundRedirect == nil && in.Robots == nil {
		s.writeError(w, r, fmt.Errorf("%w: nothing to change; send root_redirect, not_found_redirect or robots", link.ErrInvalidInput))
		return
	}
	host, err := hostParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := svc.Update(r.Context(), tenant, host, domains.Patch{RootRedirect: in.RootRedirect,
		NotFoundRedirect: in.NotFoundRedirect, Robots: in.Robots})
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireDomain(d))
}

func (s *Server) removeDomain(w http.ResponseWriter, r *http.Request, tenant int64) {
	svc, ok := s.domains(w, r, tenant)
	if !ok {
		return
	}
	host, err := hostParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := svc.Remove(r.Context(), tenant, host); err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
