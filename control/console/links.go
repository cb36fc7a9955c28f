package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
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
	Q, Tag, Status, From, To, Domain, Sort string
}

// sortChoice is one order the list offers.
type sortChoice struct{ Value, Label string }

// sortChoices are the list's orders, the default first.
var sortChoices = []sortChoice{
	{string(links.SortNewest), "Newest first"},
	{string(links.SortOldest), "Oldest first"},
	{string(links.SortCode), "Code (A to Z)"},
	{string(links.SortHost), "Target host (A to Z)"},
}

type listData struct {
	Filter listFilter
	// Domains are the filter's choices; none when the tenant has only
	// the platform's domain.
	Domains []domainChoice
	Sorts   []sortChoice
	// SortLabel names the order for the table's caption.
	SortLabel string
	Rows      []row
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
		Domain: strings.TrimSpace(q.Get("domain")), Sort: q.Get("sort")}
	// The service checks the search, the tags and the domain
	// (links.Service.ListPage).
	req := links.ListRequest{Limit: pageSize, Search: strings.TrimSpace(f.Q), Tags: splitTags(f.Tag), Domain: f.Domain,
		Sort: links.SortNewest}
	if f.Sort != "" {
		known := false
		for _, c := range sortChoices {
			known = known || f.Sort == c.Value
		}
		if !known {
			return f, req, fmt.Errorf("sort must be newest, oldest, code or host")
		}
		req.Sort = links.Sort(f.Sort)
	}
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
	if v := q.Get("cursor"); v != "" {
		if req.After, err = links.ParseCursor(v, req.Sort); err != nil {
			return f, req, errors.New(message(err))
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
	// Not r.URL.Query(), which drops a malformed pair (a ';' in it)
	// without a word: a filter or an order lost so would list other
	// links than were asked for.
	query, qerr := url.ParseQuery(r.URL.RawQuery)
	f, req, err := parseList(query)
	if qerr != nil && err == nil {
		err = errors.New("the address's query string is malformed")
	}
	data := listData{Filter: f, Domains: domains, Sorts: sortChoices, SortLabel: strings.ToLower(sortChoices[0].Label), CSRF: sess.CSRF}
	for _, c := range sortChoices {
		if c.Value == string(req.Sort) {
			data.SortLabel = strings.ToLower(c.Label)
		}
	}
	if err != nil {
		data.Problem = "Cannot list: " + err.Error() + "."
		s.render(w, r, http.StatusBadRequest, "links", page{Title: "Links", Session: &sess, Data: data})
		return
	}
	p, err := s.links.ListPage(r.Context(), sess.TenantID, req)
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
	for _, l := range p.Links {
		data.Rows = append(data.Rows, s.row(l))
	}
	if !p.Next.IsZero() {
		q := url.Values{}
		for k, v := range map[string]string{"q": f.Q, "tag": f.Tag, "status": f.Status, "from": f.From, "to": f.To, "domain": f.Domain, "sort": f.Sort} {
			if v != "" {
				q.Set(k, v)
			}
		}
		// The cursor carries the last row's sort key and ID: the next
		// page starts right after it in this order.
		q.Set("cursor", p.Next.String())
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
	Extras                                                 extrasForm // rules, password, click limit (extras.go)
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
		Data: linkFormData{Form: linkForm{Redirect: "302", Domain: r.URL.Query().Get("domain"), Extras: extrasForm{Action: Prefix + "links"}}, Domains: choices, CSRF: sess.CSRF}})
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
	f.Extras = readExtras(r.PostForm, Prefix+"links")
	if ruleOp(r, &f.Extras, refuse) {
		return
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
	req := links.CreateRequest{Domain: f.Domain,
		URL: withUTM(f.URL, f), Code: f.Code, ExpiresAt: exp, RedirectType: rt, Title: f.Title, Tags: splitTags(f.Tags)}
	if !f.Extras.create(&req) {
		refuse(http.StatusBadRequest, f.Extras.Summary())
		return
	}
	created, err := s.links.Create(r.Context(), sess.TenantID, req)
	if err != nil {
		if f.Extras.markError(err) {
			refuse(http.StatusBadRequest, f.Extras.Summary())
			return
		}
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
		Title: l.Title, Tags: strings.Join(l.Tags, ", "), Extras: extrasFormOf(l, linkHref(l, ""))}
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

// editLink saves the detail form: target, redirect type, expiry, title and
// tags, each only when it changed (so an unchanged expiry in the past is
// no error), in one update.
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
	f.Extras = readExtras(r.PostForm, linkHref(l, ""))
	f.Extras.HasPassword, f.Extras.Limit = old.Extras.HasPassword, old.Extras.Limit
	if ruleOp(r, &f.Extras, refuse) {
		return
	}
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
	// Tags go in the same update, so the edit is one transaction: saved
	// whole or not at all (tags are no part of the link's version, so a
	// change of tags alone writes none).
	if f.Tags != old.Tags {
		tags := splitTags(f.Tags)
		u.Tags = &tags
	}
	if !f.Extras.update(&u, old.Extras) {
		refuse(http.StatusBadRequest, f.Extras.Summary())
		return
	}
	if u == (links.Update{}) {
		http.Redirect(w, r, linkHref(l, ""), http.StatusSeeOther)
		return
	}
	if _, err := s.links.Update(r.Context(), sess.TenantID, domainParam(r), l.Code, u); err != nil {
		if f.Extras.markError(err) {
			refuse(http.StatusBadRequest, f.Extras.Summary())
			return
		}
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
