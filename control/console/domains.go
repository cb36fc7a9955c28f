package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// A link's key is (domain, code): pages of a link off the platform's
// domain are addressed with ?domain=<host> (the platform's need none, so
// their paths are what they were before domains), and every row, path and
// form carries it.

// row is a link as a page shows it.
type row struct {
	*links.Link
	Short string
	State link.Status // effective: expired shows as such
	// Host is the domain the row shows: for the platform's, the host of
	// the public URL its short URLs are on.
	Host string
	// ID is the row's element id, unique on a page that lists the same
	// code on two domains: "row-" + code on the platform's domain,
	// "row-" + code + "@" + host on another (neither a code nor a host
	// holds '@').
	ID string
}

func (s *Server) row(l *links.Link) row {
	r := row{Link: l, Short: s.short.Of(l.DomainID, l.Domain, l.Code), State: links.State(&l.Link, s.cfg.Now()),
		Host: l.Domain, ID: "row-" + l.Code}
	if l.DomainID == link.DefaultDomain {
		r.Host = s.short.Host
	} else {
		r.ID += "@" + l.Domain
	}
	return r
}

// Href is the console path of the link's page, or of its sub page (e.g.
// "delete"), with the query kv (pairs of name and value): a link off the
// platform's domain carries its domain in ?domain=, so every page and form
// is addressed by (domain, code).
func (r row) Href(sub string, kv ...string) template.URL {
	return template.URL(linkHref(r.Link, sub, kv...))
}

func linkHref(l *links.Link, sub string, kv ...string) string {
	p := Prefix + "links/" + url.PathEscape(l.Code)
	if sub != "" {
		p += "/" + sub
	}
	q := url.Values{}
	if l.DomainID != link.DefaultDomain {
		q.Set("domain", l.Domain)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// domainParam is the domain a link page is addressed on: ?domain=, ""
// for the platform's. It is the links service's to resolve, and to refuse
// (not found) when it is not one of the tenant's.
func domainParam(r *http.Request) string {
	return strings.TrimSpace(r.URL.Query().Get("domain"))
}

// domainChoice is a domain a form offers.
type domainChoice struct{ Value, Label string }

// domainChoices are the session's domains for the create form (active
// ones, the platform's first with the value "", as the service takes it)
// and for the list's filter (every one, removed ones too: their links
// stay, each by its host).
func (s *Server) domainChoices(r *http.Request, sess Session) (create, filter []domainChoice, err error) {
	platform := domainChoice{Label: s.short.Host + " (platform)"}
	create = []domainChoice{platform}
	if s.cfg.Domains == nil {
		return create, nil, nil
	}
	ds, err := s.cfg.Domains.List(r.Context(), sess.TenantID)
	if err != nil {
		return nil, nil, fmt.Errorf("list domains: %w", err)
	}
	var own []domainChoice
	for _, d := range ds {
		if d.ID == link.DefaultDomain {
			filter = append(filter, domainChoice{Value: d.Host, Label: platform.Label})
			continue
		}
		label := d.Host
		if d.Status != link.DomainActive {
			label += " (removed)"
		} else {
			create = append(create, domainChoice{Value: d.Host, Label: d.Host})
		}
		own = append(own, domainChoice{Value: d.Host, Label: label})
	}
	if len(own) == 0 {
		return create, nil, nil // one domain: nothing to filter by
	}
	return create, append(filter, own...), nil
}
