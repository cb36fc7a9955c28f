// Package link holds the link value both sides agree on: statuses, redirect
// types, the syntax of codes, and the domain errors.
package link

import (
	"errors"
	"time"
)

// Status is a link's lifecycle state. Deleted links keep their row as a
// tombstone: codes are never reused.
type Status string

const (
	Active   Status = "active"
	Disabled Status = "disabled"
	Deleted  Status = "deleted"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s == Active || s == Disabled || s == Deleted }

// RedirectType is the HTTP status a hit answers with. 302 is the default:
// browsers and intermediaries may cache 301 and 308 for good, which would make
// a later change or disable invisible to those clients.
type RedirectType int

const DefaultRedirect RedirectType = 302

// Valid reports whether t is one of 301, 302, 307, 308.
func (t RedirectType) Valid() bool { return t == 301 || t == 302 || t == 307 || t == 308 }

// Code syntax shared by control (which issues codes) and edge (which rejects
// malformed paths before any lookup). Generated codes are exactly six base62
// characters; custom codes may also use '-' and '_' and other lengths.
const (
	MinCodeLen = 4
	MaxCodeLen = 32
)

// ValidCodeSyntax reports whether code could name a link: MinCodeLen to
// MaxCodeLen characters of 0-9, A-Z, a-z, '-' or '_'. It does not allocate.
func ValidCodeSyntax[S ~string | ~[]byte](code S) bool {
	if len(code) < MinCodeLen || len(code) > MaxCodeLen {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c >= '0' && c <= '9', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// Link is a short code's mapping as the authority holds it.
type Link struct {
	ID           uint64
	Code         string
	TenantID     int64
	Namespace    string
	URL          string // normalized target, what redirects use
	URLOriginal  string // as the creator sent it
	RedirectType RedirectType
	Status       Status
	ExpiresAt    time.Time // zero: never
	// Extras are its routing rules, password hash and click limit (see
	// Extras); the zero value for a plain link.
	Extras    Extras
	Version   uint64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Expired reports whether the link has expired at now; expiry is evaluated at
// read time, never by a sweeper.
func (l *Link) Expired(now time.Time) bool {
	return !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt)
}

// Domain errors. Transports map them to statuses; storage maps driver errors
// to them.
var (
	ErrNotFound     = errors.New("link not found")
	ErrCodeTaken    = errors.New("code already taken")
	ErrInvalidURL   = errors.New("invalid target url")
	ErrInvalidInput = errors.New("invalid input")
	ErrUnauthorized = errors.New("unauthorized")
	ErrUnavailable  = errors.New("temporarily unavailable")
)

// EdgeRoutes are the paths an edge answers itself. None is one path segment
// of code characters, so no code can ever shadow them: probes and scrapes
// live under /-/ (a code is one segment, and "-" alone is too short to be
// one), the rest hold a '.'. Control still reserves their first segments,
// with its own routes.
var EdgeRoutes = []string{"/-/livez", "/-/readyz", "/-/startupz", "/-/metrics", "/robots.txt", "/favicon.ico"}

// Errors of the creator API's lifecycle and idempotency.
var (
	// ErrDeleted: the link is a tombstone; its code stays taken for good.
	ErrDeleted = errors.New("link deleted")
	// ErrIdempotencyConflict: an idempotency key was sent again with a
	// different request.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
	// ErrExhausted: the namespace has handed out its last ID, so no link
	// can be created in it until an operator extends it. Retrying does
	// not help. The create path wraps it together with ErrUnavailable
	// (nothing can be created now), so a transport checks it first.
	ErrExhausted = errors.New("link id space exhausted")
)
