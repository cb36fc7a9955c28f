package importer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// The csv format: a CSV of one's own, for links kept in a spreadsheet or
// written by a script, rather than another shortener's export
// (docs/cli.md, "A CSV of your own"). A header row names the columns, in
// any order and case ('_', '-' and spaces ignored, so "Redirect Type" is
// redirect_type):
//
//	url            the target (required)
//	code           the short code to keep; empty for a new one
//	domain         the host of one of the tenant's domains; empty for
//	               the import's domain
//	title          the link's title
//	tags           tags separated by '|', ',' or ';' (none of which a tag
//	               may hold)
//	redirect_type  301, 302, 307 or 308; empty for the import's
//	expires_at     an RFC 3339 time (2026-12-31T23:59:00Z); empty: never
//	max_clicks     how many counted clicks the link redirects for; empty:
//	               no limit
//
// Other columns are not read: Reader.Ignored names them, once, and the
// import goes on. A password column refuses the file instead: a sheet of
// passwords is one forwarded attachment from leaking every one of them,
// and importing its links without their passwords would publish targets
// their creator meant to protect. A cell that is not what its column
// takes makes its row a reject, with the reason.

// plainColumns are the csv format's columns, normalized (normName).
var plainColumns = []string{"url", "code", "domain", "title", "tags", "redirecttype", "expiresat", "maxclicks"}

// plainRefused are columns whose presence refuses the file, and why.
var plainRefused = map[string]string{
	"password": "the csv format does not read passwords (a spreadsheet of passwords is one leak away from all of them, " +
		"and the links would go in unprotected): remove the password column, import, then set each password in the console " +
		"or with control links set --password-file",
}

// plainHeader sets r up to read the csv format's rows from the header
// fields.
func (r *Reader) plainHeader(fields []string) error {
	idx := make(map[string]int, len(plainColumns))
	for i, f := range fields {
		n := normName(f)
		if why, ok := plainRefused[n]; ok {
			return errors.New(why)
		}
		known := false
		for _, c := range plainColumns {
			known = known || n == c
		}
		switch _, dup := idx[n]; {
		case n == "":
			r.ignored = append(r.ignored, fmt.Sprintf("column %d (no name)", i+1))
		case !known:
			r.ignored = append(r.ignored, strings.TrimSpace(f))
		case dup:
			r.ignored = append(r.ignored, strings.TrimSpace(f)+" (a second time)")
		default:
			idx[n] = i
		}
	}
	col := func(n string) int {
		if i, ok := idx[n]; ok {
			return i
		}
		return -1
	}
	urlCol := col("url")
	if urlCol < 0 {
		return fmt.Errorf("a CSV of your own needs a header row with a url column (and if you like code, domain, title, tags, redirect_type, expires_at, max_clicks); the first line is %q", fields)
	}
	code, domain, title, tags := col("code"), col("domain"), col("title"), col("tags")
	rt, exp, maxClicks := col("redirecttype"), col("expiresat"), col("maxclicks")
	r.pick = func(f []string) (string, string, string) { return field(f, code), field(f, urlCol), field(f, domain) }
	r.meta = func(f []string) (string, []string) { return field(f, title), splitTags(field(f, tags)) }
	r.extra = func(f []string, rec *Record) {
		var errs []string
		if v := field(f, rt); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || !link.RedirectType(n).Valid() {
				errs = append(errs, fmt.Sprintf("redirect_type %.20q is not 301, 302, 307 or 308", v))
			} else {
				rec.RedirectType = n
			}
		}
		if v := field(f, exp); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("expires_at %.40q is not an RFC 3339 time such as 2026-12-31T23:59:00Z", v))
			} else {
				rec.ExpiresAt = t.UTC()
			}
		}
		if v := field(f, maxClicks); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > link.MaxClicksLimit {
				errs = append(errs, fmt.Sprintf("max_clicks %.24q is not a whole number from 1 to %d", v, int64(link.MaxClicksLimit)))
			} else {
				rec.MaxClicks = n
			}
		}
		if len(errs) > 0 {
			rec.Err = errors.New(strings.Join(errs, "; "))
		}
	}
	return nil
}

// Ignored names the header's columns that the format does not read, in
// the header's order: the csv format's unknown, unnamed and repeated
// columns (other formats read the columns they know and leave the rest
// unnamed here, as their exports hold many). Nil for none.
func (r *Reader) Ignored() []string { return r.ignored }
