package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// pageSize is how many links a list page shows.
const pageSize = 50

// listFilter is the list's query string, as typed, so the form shows it
// back and the next page keeps it.
type listFilter struct {
	Q, Tag, Status, From, To, Domain string
}

type listData struct {
	Filter listFilter
	// Domains are the filter's choices; none when the tenant has only
	// the platform's domain.
	Domains []domainChoice
	Rows    []row
	// Next is the next page's path and query, built from url.Values
	// here (so html/template need not, and must not, escape it again);
	// empty on the last page.
	Next    template.URL
	Problem string
	CSRF    string
}

var statuses = []string{"", "active", "expired", "disabled", "deleted"}

// parseList reads the list's filters. Dates are whole UTC days: from is
// inclusive, to takes the whole day.
func parseList(q url.Values) (listFilter, links.ListRequest, error) {
	f := listFilter{Q: q.Get("q"), Tag: q.Get("tag"), Status: q.Get("status"), From: q.Get("from"), To: q.Get("to"),
		Domain: strings.TrimSpace(q.Get("domain"))}
	// The service checks the search, the tags and the domain
	// (links.Service.List).
	req := links.ListRequest{Limit: pageSize, Search: strings.TrimSpace(f.Q), Tags: splitTags(f.Tag), Domain: f.Domain}
	ok := false
	for _, st := range statuses {
		ok = ok || f.Status == st
	}
	if !ok {
		return f, req, fmt.Errorf("status must be active, expired, disabled or deleted")
	}
	req.Status = link.Status(f.Status)
	day := func(name, v string) (time.Time, error) {
		if v == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse("2006-01-02", v)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s must be a date, YYYY-MM-DD", name)
		}
		return t, nil
	}
	var err error
	if req.CreatedAfter, err = day("from", f.From); err != nil {
		return f, req, err
	}
	to, err := day("to", f.To)
	if err != nil {
		return f, req, err
	}
	if !to.IsZero() {
		req.CreatedBefore = to.AddDate(0, 0, 1)
	}
	if !req.CreatedAfter.IsZero() && !req.CreatedBefore.IsZero() && !req.CreatedAfter.Before(req.CreatedBefore) {
		return f, req, fmt.Errorf("from must not be after to")
	}
	if v := q.Get("before"); v != "" {
		if req.Before, err = strconv.ParseUint(v, 10, 64); err != nil || req.Before == 0 {
			return f, req, fmt.Errorf("the page cursor is not valid")
		}
	}
	return f, req, nil
}

func (s *Server) listLinks(w http.ResponseWriter, r *http.Request, sess Session) {
	_, domains, err := s.domainChoices(r, sess)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, req, err := parseList(r.URL.Query())
	data := listData{Filter: f, Domains: domains, CSRF: sess.CSRF}
	if err != nil {
		data.Problem = "Cannot list: " + err.Error() + "."
		s.render(w, r, http.StatusBadRequest, "links", page{Title: "Links", Session: &sess, Data: data})
		return
	}
	ls, next, err := s.links.List(r.Context(), sess.TenantID, req)
	if err != nil {
		if errors.Is(err, link.ErrNotFound) && req.Domain != "" {
			data.Problem = "Cannot list: that domain is not one of this tenant's."
			s.render(w, r, http.StatusBadRequest, "links", page{Title: "Links", Session: &sess, Data: data})
			return
		}
		if msg, ok := userError(err); ok {
			data.Problem = msg
			s.render(w, r, http.StatusBadRequest, "links", page{Title: "Links", Session: &sess, Data: data})
			return
		}
		s.fail(w, r, err)
		return
	}
	for _, l := range ls {
		data.Rows = append(data.Rows, s.row(l))
	}
	if next != 0 {
		q := url.Values{}
		for k, v := range map[string]string{"q": f.Q, "tag": f.Tag, "status": f.Status, "from": f.From, "to": f.To, "domain": f.Domain} {
			if v != "" {
				q.Set(k, v)
			}
		}
		q.Set("before", strconv.FormatUint(next, 10))
		data.Next = template.URL(Prefix + "links?" + q.Encode())
	}
	s.render(w, r, http.StatusOK, "links", page{Title: "Links", Session: &sess, Notice: notice(r), Data: data})
}

// notice is the one-line confirmation a redirect after a post asks for.
func notice(r *http.Request) string {
	switch r.URL.Query().Get("done") {
	case "created":
		return "Link created."
	case "saved":
		return "Changes saved."
	case "enabled":
		return "Link enabled: it redirects again."
	case "disabled":
		return "Link disabled: edges answer 410 Gone."
	case "deleted":
		return "Link deleted. Its code is never reused."
	}
	return ""
}

// linkForm is the create and edit form, as typed, so a refused post shows
// everything back.
type linkForm struct {
	Domain                                                 string // create only: "" is the platform's
	URL, Code, Expires, Redirect, Title, Tags              string
	UTMSource, UTMMedium, UTMCampaign, UTMTerm, UTMContent string
}

type linkFormData struct {
	Form    linkForm
	Domains []domainChoice
	Problem string
	CSRF    string
}

func (s *Server) newLink(w http.ResponseWriter, r *http.Request, sess Session) {
	choices, _, err := s.domainChoices(r, sess)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "link_new", page{Title: "New link", Session: &sess,
		Data: linkFormData{Form: linkForm{Redirect: "302", Domain: r.URL.Query().Get("domain")}, Domains: choices, CSRF: sess.CSRF}})
}

func readLinkForm(r *http.Request) linkForm {
	v := r.PostForm.Get
	return linkForm{Domain: strings.TrimSpace(v("domain")), URL: strings.TrimSpace(v("url")), Code: strings.TrimSpace(v("code")), Expires: v("expires"), Redirect: v("redirect"),
		Title: strings.TrimSpace(v("title")), Tags: v("tags"),
		UTMSource: v("utm_source"), UTMMedium: v("utm_medium"), UTMCampaign: v("utm_campaign"), UTMTerm: v("utm_term"), UTMContent: v("utm_content")}
}

// withUTM adds the form's UTM parameters to target's query, replacing
// any of the same name. A target that does not parse is left for the
// service to refuse.
func withUTM(target string, f linkForm) string {
	params := [][2]string{{"utm_source", f.UTMSource}, {"utm_medium", f.UTMMedium}, {"utm_campaign", f.UTMCampaign}, {"utm_term", f.UTMTerm}, {"utm_content", f.UTMContent}}
	set := false
	for _, p := range params {
		set = set || strings.TrimSpace(p[1]) != ""
	}
	if !set {
		return target
	}
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	q := u.Query()
	for _, p := range params {
		if v := strings.TrimSpace(p[1]); v != "" {
			q.Set(p[0], v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// parseRedirect reads a redirect type field; empty is the default.
func parseRedirect(v string) (link.RedirectType, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || !link.RedirectType(n).Valid() {
		return 0, fmt.Errorf("%w: redirect type must be 301, 302, 307 or 308", link.ErrInvalidInput)
	}
	return link.RedirectType(n), nil
}

// parseExpiry reads a datetime-local field as UTC; empty is none.
func parseExpiry(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: expiry must be a date and time, YYYY-MM-DDTHH:MM (UTC)", link.ErrInvalidInput)
}

func (s *Server) createLink(w http.ResponseWriter, r *http.Request, sess Session) {
	f := readLinkForm(r)
	choices, _, err := s.domainChoices(r, sess)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	refuse := func(status int, msg string) {
		s.render(w, r, status, "link_new", page{Title: "New link", Session: &sess,
			Data: linkFormData{Form: f, Domains: choices, Problem: msg, CSRF: sess.CSRF}})
	}
	rt, err := parseRedirect(f.Redirect)
	if err != nil {
		refuse(http.StatusBadRequest, message(err))
		return
	}
	exp, err := parseExpiry(f.Expires)
	if err != nil {
		refuse(http.StatusBadRequest, message(err))
		return
	}
	created, err := s.links.Create(r.Context(), sess.TenantID, links.CreateRequest{Domain: f.Domain,
		URL: withUTM(f.URL, f), Code: f.Code, ExpiresAt: exp, RedirectType: rt, Title: f.Title, Tags: splitTags(f.Tags)})
	if err != nil {
		if errors.Is(err, link.ErrNotFound) {
			// The service's word for a host the tenant may not use.
			refuse(http.StatusBadRequest, "That domain is not one of this tenant's: choose one from the list.")
			return
		}
		if msg, ok := userError(err); ok {
			status := http.StatusBadRequest
			if errors.Is(err, link.ErrCodeTaken) {
				status = http.StatusConflict
			}
			refuse(status, msg)
			return
		}
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, linkHref(created.Link, "", "done", "created"), http.StatusSeeOther)
}

type linkData struct {
	Row     row
	Form    linkForm
	Problem string
	CSRF    string
	QR      bool
}

func (s *Server) getLink(w http.ResponseWriter, r *http.Request, sess Session) (*links.Link, bool) {
	l, err := s.links.Get(r.Context(), sess.TenantID, domainParam(r), r.PathValue("code"))
	if errors.Is(err, link.ErrNotFound) {
		s.errorPage(w, r, http.StatusNotFound, "There is no such link in this tenant.")
		return nil, false
	}
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return l, true
}

func (s *Server) editForm(l *links.Link) linkForm {
	return linkForm{URL: l.URLOriginal, Redirect: strconv.Itoa(int(l.RedirectType)), Expires: datetimeLocal(l.ExpiresAt),
		Title: l.Title, Tags: strings.Join(l.Tags, ", ")}
}

func datetimeLocal(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04")
}

func (s *Server) linkPage(w http.ResponseWriter, r *http.Request, sess Session) {
	l, ok := s.getLink(w, r, sess)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "link", page{Title: "Link " + l.Code + " on " + s.row(l).Host, Session: &sess, Notice: notice(r),
		Data: linkData{Row: s.row(l), Form: s.editForm(l), CSRF: sess.CSRF, QR: s.cfg.QR != nil}})
}

// editLink saves the detail form: target, redirect type and expiry, each
// only when it changed, so an unchanged expiry in the past is no error.
func (s *Server) editLink(w http.ResponseWriter, r *http.Request, sess Session) {
	l, ok := s.getLink(w, r, sess)
	if !ok {
		return
	}
	f := readLinkForm(r)
	refuse := func(status int, msg string) {
		s.render(w, r, status, "link", page{Title: "Link " + l.Code, Session: &sess,
			Data: linkData{Row: s.row(l), Form: f, Problem: msg, CSRF: sess.CSRF, QR: s.cfg.QR != nil}})
	}
	var u links.Update
	old := s.editForm(l)
	if f.URL != old.URL {
		u.URL = &f.URL
	}
	if f.Redirect != old.Redirect {
		rt, err := parseRedirect(f.Redirect)
		if err != nil {
			refuse(http.StatusBadRequest, message(err))
			return
		}
		u.RedirectType = &rt
	}
	if f.Expires != old.Expires {
		exp, err := parseExpiry(f.Expires)
		if err != nil {
			refuse(http.StatusBadRequest, message(err))
			return
		}
		u.ExpiresAt = &exp
	}
	if f.Title != old.Title {
		u.Title = &f.Title
	}
	// Tags change apart from the link (they are no part of its version):
	// checked first, so a refused tag changes nothing, then applied after
	// the update.
	var tags links.TagChange
	if f.Tags != old.Tags {
		want, err := links.NormalizeTags(splitTags(f.Tags), links.MaxTags)
		if err != nil {
			refuse(http.StatusBadRequest, message(err))
			return
		}
		tags = tagDiff(l.Tags, want)
	}
	changed := u.URL != nil || u.RedirectType != nil || u.ExpiresAt != nil || u.Title != nil
	if !changed && len(tags.Add)+len(tags.Remove) == 0 {
		http.Redirect(w, r, linkHref(l, ""), http.StatusSeeOther)
		return
	}
	var err error
	if changed {
		_, err = s.links.Update(r.Context(), sess.TenantID, domainParam(r), l.Code, u)
	}
	if err == nil && len(tags.Add)+len(tags.Remove) > 0 {
		tags.Codes, tags.Domain = []string{l.Code}, domainParam(r)
		_, err = s.links.TagLinks(r.Context(), sess.TenantID, tags)
	}
	if err != nil {
		if msg, ok := userError(err); ok {
			refuse(http.StatusBadRequest, msg)
			return
		}
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, linkHref(l, "", "done", "saved"), http.StatusSeeOther)
}

// setStatus enables or disables a link in place: a plain form post that
// comes back to where it was posted from (the list or the detail), or, for
// htmx, the list row redrawn.
func (s *Server) setStatus(w http.ResponseWriter, r *http.Request, sess Session) {
	st := link.Status(r.PostForm.Get("status"))
	if st != link.Active && st != link.Disabled {
		s.errorPage(w, r, http.StatusBadRequest, "A link can be set active or disabled; delete removes it.")
		return
	}
	code := r.PathValue("code")
	l, err := s.links.Update(r.Context(), sess.TenantID, domainParam(r), code, links.Update{Status: &st})
	switch {
	case errors.Is(err, link.ErrNotFound):
		s.errorPage(w, r, http.StatusNotFound, "There is no such link in this tenant.")
		return
	case err != nil:
		if msg, ok := userError(err); ok {
			s.errorPage(w, r, http.StatusConflict, msg)
			return
		}
		s.fail(w, r, err)
		return
	}
	if r.Header.Get("HX-Request") == "true" && r.PostForm.Get("from") == "list" {
		s.partial(w, r, "links", "row", rowData{Row: s.row(l), CSRF: sess.CSRF})
		return
	}
	done := "enabled"
	if st == link.Disabled {
		done = "disabled"
	}
	to := linkHref(l, "", "done", done)
	if r.PostForm.Get("from") == "list" {
		to = Prefix + "links?done=" + done
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// splitTags is a comma-separated tag field's tags, blanks dropped.
func splitTags(v string) []string {
	var out []string
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// tagDiff is what turns have into want, both normalized.
func tagDiff(have, want []string) links.TagChange {
	var c links.TagChange
	for _, t := range want {
		if !slices.Contains(have, t) {
			c.Add = append(c.Add, t)
		}
	}
	for _, t := range have {
		if !slices.Contains(want, t) {
			c.Remove = append(c.Remove, t)
		}
	}
	return c
}

// rowData is one list row, rendered alone for htmx.
type rowData struct {
	Row  row
	CSRF string
}

func (s *Server) confirmDelete(w http.ResponseWriter, r *http.Request, sess Session) {
	l, ok := s.getLink(w, r, sess)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "link_delete", page{Title: "Delete " + l.Code, Session: &sess, Data: linkData{Row: s.row(l), CSRF: sess.CSRF}})
}

func (s *Server) deleteLink(w http.ResponseWriter, r *http.Request, sess Session) {
	_, err := s.links.Delete(r.Context(), sess.TenantID, domainParam(r), r.PathValue("code"))
	switch {
	case errors.Is(err, link.ErrNotFound):
		s.errorPage(w, r, http.StatusNotFound, "There is no such link in this tenant.")
		return
	case err != nil && !errors.Is(err, link.ErrDeleted):
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"links?done=deleted", http.StatusSeeOther)
}

// userError is the message of an error the user can act on: bad input, a
// taken code, a deleted link.
func userError(err error) (string, bool) {
	switch {
	case errors.Is(err, link.ErrInvalidInput), errors.Is(err, link.ErrInvalidURL), errors.Is(err, link.ErrCodeTaken),
		errors.Is(err, link.ErrDeleted):
		return message(err), true
	}
	return "", false
}

// message is err as a sentence for the page: the domain's wording, with
// its sentinel's prefix ("invalid input: ") dropped.
func message(err error) string {
	msg := err.Error()
	for _, prefix := range []string{link.ErrInvalidInput.Error() + ": ", link.ErrInvalidURL.Error() + ": "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	switch {
	case errors.Is(err, link.ErrCodeTaken):
		return "That code is taken: choose another."
	case errors.Is(err, link.ErrDeleted):
		return "That link is deleted; it cannot be changed."
	}
	if msg == "" {
		return "The request was refused."
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}
