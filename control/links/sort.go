package links

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// Sort is the order of a list. Every order ends in the link's ID, so it is
// total, and a page resumes exactly after the last row it showed (Cursor):
// a link created, changed or deleted between two pages moves no other link
// across the cut, and none is listed twice.
type Sort string

// The orders a list can take. Each is served by an index that starts with
// the tenant (schema 020), read from the cursor on, so a page costs about a
// page of index entries however many links the tenant holds.
const (
	// SortID is newest ID first: the API's order. IDs are per domain
	// (each domain its own range), so across domains it is not creation
	// order; SortNewest is.
	SortID Sort = ""
	// SortNewest is newest creation first (created_at, then ID, both
	// descending): the console's default.
	SortNewest Sort = "newest"
	// SortOldest is oldest creation first.
	SortOldest Sort = "oldest"
	// SortCode is by code, byte-wise ("0-9A-Za-z" order, as codes
	// compare), then ID; the same code on two domains is two rows.
	SortCode Sort = "code"
	// SortHost is by the target's host (ListHost), byte-wise, then ID: a
	// campaign's links to one site together.
	SortHost Sort = "host"
)

// Sorts are the orders a creator may ask for, SortID aside.
var Sorts = []Sort{SortNewest, SortOldest, SortCode, SortHost}

// Valid reports whether s is one of the orders (SortID included).
func (s Sort) Valid() bool {
	switch s {
	case SortID, SortNewest, SortOldest, SortCode, SortHost:
		return true
	}
	return false
}

// Descending reports whether s lists the larger key first.
func (s Sort) Descending() bool { return s == SortID || s == SortNewest }

// Cursor is where a page of a sorted list (any Sort but SortID) resumes:
// after the link whose sort key is Key and whose ID is ID, in the list's
// order. The zero Cursor is the first page.
type Cursor struct {
	Sort Sort
	// Key is the last row's sort key as text: its created_at in RFC 3339
	// with nanoseconds (SortNewest, SortOldest), its code (SortCode) or
	// its target's host (SortHost).
	Key string
	ID  uint64
}

// IsZero reports whether c is the first page's cursor.
func (c Cursor) IsZero() bool { return c.ID == 0 }

// Created is the cursor's key as a time (SortNewest, SortOldest).
func (c Cursor) Created() (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, c.Key)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: the page cursor is not valid", link.ErrInvalidInput)
	}
	return t, nil
}

// cursorVersion starts every encoded cursor, so a later format can tell
// an old one apart.
const cursorVersion = "c1"

// maxCursorLen bounds an encoded cursor: a host of 253 bytes, base64, and
// the rest.
const maxCursorLen = 512

// String encodes c as an opaque token for a URL (base64url, no padding).
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	raw := cursorVersion + "." + string(c.Sort) + "." + strconv.FormatUint(c.ID, 10) + "." + c.Key
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCursor decodes a token String made for a list in order sort. A
// token that is malformed, or was made for another order, is
// link.ErrInvalidInput: a page of one order cannot resume another.
func ParseCursor(token string, sort Sort) (Cursor, error) {
	bad := fmt.Errorf("%w: the page cursor is not valid", link.ErrInvalidInput)
	if token == "" || len(token) > maxCursorLen || sort == SortID {
		return Cursor{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return Cursor{}, bad
	}
	parts := strings.SplitN(string(b), ".", 4)
	if len(parts) != 4 || parts[0] != cursorVersion {
		return Cursor{}, bad
	}
	if Sort(parts[1]) != sort {
		return Cursor{}, fmt.Errorf("%w: the page cursor is of another order; start again from the first page", link.ErrInvalidInput)
	}
	id, err := strconv.ParseUint(parts[2], 10, 63)
	if err != nil || id == 0 {
		return Cursor{}, bad
	}
	c := Cursor{Sort: sort, Key: parts[3], ID: id}
	if err := c.check(); err != nil {
		return Cursor{}, err
	}
	return c, nil
}

// check refuses a key its order could not have made.
func (c Cursor) check() error {
	bad := fmt.Errorf("%w: the page cursor is not valid", link.ErrInvalidInput)
	switch c.Sort {
	case SortNewest, SortOldest:
		if _, err := c.Created(); err != nil {
			return bad
		}
	case SortCode:
		if !link.ValidCodeSyntax(c.Key) {
			return bad
		}
	case SortHost:
		// Whatever ListHost can answer: at most a host's length of
		// the characters a normalized URL's host holds.
		if len(c.Key) > 253 || strings.ContainsAny(c.Key, "/?#:\x00") {
			return bad
		}
	default:
		return bad
	}
	return nil
}

// listHost is ListHost's pattern: schema 020's link_host(url) is
// substring(url FROM '^[a-z][a-z0-9+.-]*://([^/?#:]*)').
var listHost = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://([^/?#:]*)`)

// ListHost is the host SortHost orders by: what follows the scheme of a
// normalized target URL up to its port, path, query or fragment. It is
// the Go twin of the SQL function link_host (schema 020), which the index
// is built on; control/postgres tests that the two agree, because a
// cursor made from one and compared by the other must mean the same row.
func ListHost(normalizedURL string) string {
	m := listHost.FindStringSubmatch(normalizedURL)
	if m == nil {
		return ""
	}
	return m[1]
}

// CursorOf is the cursor that resumes a list in order s after l.
func CursorOf(s Sort, l *Link) Cursor {
	c := Cursor{Sort: s, ID: l.ID}
	switch s {
	case SortNewest, SortOldest:
		c.Key = l.CreatedAt.UTC().Format(time.RFC3339Nano)
	case SortCode:
		c.Key = l.Code
	case SortHost:
		c.Key = ListHost(l.URL)
	}
	return c
}

// Page is one page of a sorted list.
type Page struct {
	Links []*Link
	// Next resumes the list after this page; zero on the last page.
	Next Cursor
}

// ListPage returns a page of the tenant's links in order q.Sort, resuming
// after q.After (zero: the first page), filtered as List filters. q.Before
// is for SortID alone; an order other than SortID resumes from q.After,
// which must be of that order. An unknown order, or a cursor of another,
// is link.ErrInvalidInput.
func (s *Service) ListPage(ctx context.Context, tenantID int64, q ListRequest) (Page, error) {
	if !q.Sort.Valid() {
		return Page{}, fmt.Errorf("%w: sort must be one of newest, oldest, code or host", link.ErrInvalidInput)
	}
	if q.Sort == SortID {
		ls, next, err := s.List(ctx, tenantID, q)
		if err != nil {
			return Page{}, err
		}
		p := Page{Links: ls}
		if next != 0 {
			p.Next = Cursor{ID: next}
		}
		return p, nil
	}
	if q.Before != 0 {
		return Page{}, fmt.Errorf("%w: a sorted list resumes from its cursor, not from an ID", link.ErrInvalidInput)
	}
	if !q.After.IsZero() {
		if q.After.Sort != q.Sort {
			return Page{}, fmt.Errorf("%w: the page cursor is of another order; start again from the first page", link.ErrInvalidInput)
		}
		if err := q.After.check(); err != nil {
			return Page{}, err
		}
	}
	ls, more, err := s.list(ctx, tenantID, q)
	if err != nil {
		return Page{}, err
	}
	p := Page{Links: ls}
	if more {
		p.Next = CursorOf(q.Sort, ls[len(ls)-1])
	}
	return p, nil
}
