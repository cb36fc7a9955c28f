// Package authority is the protocol edges use to ask control about a code
// they do not know: NATS request-reply on Subject, answered by control
// instances in QueueGroup.
//
// Request-reply over NATS rather than a read replica per edge: edges already
// hold a NATS connection for the change stream, so they need no database
// credentials, no connection pool and no network path to PostgreSQL; a
// compromised or misconfigured edge can only ask "what is code X", one code
// at a time, at a rate control bounds. The queue group spreads requests over
// every running control instance, and a request nobody answers fails fast
// (no responders) instead of hanging.
//
// A request is the code itself, as bytes. A reply is a compact binary record
// (see Reply); Marshal and Unmarshal validate it, so a malformed message is an
// error and never a half-filled answer.
package authority

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/edgelink/edgelink/shared/link"
)

const (
	// Subject receives lookups. Control instances subscribe in QueueGroup so
	// each request is answered once.
	Subject = "edgelink.authority.lookup"
	// QueueGroup shares the load among control instances.
	QueueGroup = "edgelink-authority"
)

// Kind is what a reply says.
type Kind byte

const (
	// Found: the authority holds the code; the reply carries its state.
	Found Kind = 'F'
	// NotFound: no link has the code. Version is the change version the
	// authority had reached when it looked.
	NotFound Kind = 'N'
	// Unavailable: the responder could not ask its database. The edge must
	// not take it for NotFound.
	Unavailable Kind = 'U'
)

// format is the first byte of every reply, so the encoding can change
// without a flag day: a reader refuses formats it does not know.
const format byte = 1

// Reply is the authority's answer about one code.
type Reply struct {
	Kind Kind
	// Version is the link's version when Found, and the authority's change
	// version when NotFound (the newest version taken from the sequence; it
	// may belong to a transaction that is still running, so a reader must
	// let any change it later applies for the code win over this answer).
	Version uint64
	// The link's state when Found; Domain and Code are its key.
	Domain       link.DomainID
	Code         string
	URL          string
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	// Extras are the link's routing rules, password hash and click limit
	// in shared/link's wire form; "" for a plain link. Only an answer on
	// AskSubject to a question that says it reads them (Question.Extras)
	// carries them: the single-code protocol refuses a reply with extras,
	// and so must a responder asked by an edge that cannot read them
	// (which would serve the link without its password or rules).
	Extras string
}

var errInvalid = errors.New("authority: invalid reply")

var statusByte = map[link.Status]byte{link.Active: 'a', link.Disabled: 'd', link.Deleted: 'x'}

// Marshal appends the encoding of r to dst after checking it. The
// single-code protocol predates domains: it answers about the platform's
// domain only, and Marshal refuses a reply on another.
//
// Layout: format, kind, uvarint version; then for Found: status byte,
// uvarint redirect type, varint expires-at, uvarint code length, code, URL
// (the rest of the message).
func Marshal(dst []byte, r *Reply) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if r.Domain != link.DefaultDomain {
		return nil, fmt.Errorf("%w: a single-code reply on domain %d", errInvalid, r.Domain)
	}
	if r.Extras != "" {
		return nil, fmt.Errorf("%w: version %d: a single-code reply cannot carry a link's extras", errInvalid, r.Version)
	}
	dst = append(dst, format, byte(r.Kind))
	dst = binary.AppendUvarint(dst, r.Version)
	if r.Kind != Found {
		return dst, nil
	}
	dst = append(dst, statusByte[r.Status])
	dst = binary.AppendUvarint(dst, uint64(r.RedirectType))
	dst = binary.AppendVarint(dst, r.ExpiresAt)
	dst = binary.AppendUvarint(dst, uint64(len(r.Code)))
	dst = append(dst, r.Code...)
	return append(dst, r.URL...), nil
}

// Unmarshal decodes and validates a reply.
func Unmarshal(b []byte, r *Reply) error {
	*r = Reply{}
	if len(b) < 3 || b[0] != format {
		return fmt.Errorf("%w: bad header", errInvalid)
	}
	r.Kind = Kind(b[1])
	b = b[2:]
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return fmt.Errorf("%w: version", errInvalid)
	}
	r.Version, b = v, b[n:]
	if r.Kind == Found {
		if len(b) < 1 {
			return fmt.Errorf("%w: truncated", errInvalid)
		}
		r.Status = statusOf(b[0])
		b = b[1:]
		rt, n := binary.Uvarint(b)
		if n <= 0 || rt > 999 {
			return fmt.Errorf("%w: redirect type", errInvalid)
		}
		r.RedirectType, b = link.RedirectType(rt), b[n:]
		exp, n := binary.Varint(b)
		if n <= 0 {
			return fmt.Errorf("%w: expiry", errInvalid)
		}
		r.ExpiresAt, b = exp, b[n:]
		cl, n := binary.Uvarint(b)
		if n <= 0 || cl > uint64(len(b)-n) {
			return fmt.Errorf("%w: code", errInvalid)
		}
		b = b[n:]
		r.Code, r.URL = string(b[:cl]), string(b[cl:])
	} else if len(b) != 0 {
		return fmt.Errorf("%w: trailing bytes", errInvalid)
	}
	return r.validate()
}

func (r *Reply) validate() error {
	switch r.Kind {
	case NotFound, Unavailable:
		if r.Domain != 0 || r.Code != "" || r.URL != "" || r.Status != "" || r.RedirectType != 0 || r.ExpiresAt != 0 || r.Extras != "" {
			return fmt.Errorf("%w: %c reply with link fields", errInvalid, r.Kind)
		}
		return nil
	case Found:
	default:
		return fmt.Errorf("%w: kind %q", errInvalid, byte(r.Kind))
	}
	// Errors say what is wrong, never whose it is: they end up in logs,
	// which carry no code or URL.
	if r.Version == 0 || !link.ValidCodeSyntax(r.Code) || !r.Status.Valid() || r.ExpiresAt < 0 || r.Domain > link.MaxDomainID {
		return fmt.Errorf("%w: found, version %d, domain %d, status %q, code of %d bytes valid %v, expiry %d",
			errInvalid, r.Version, r.Domain, r.Status, len(r.Code), link.ValidCodeSyntax(r.Code), r.ExpiresAt)
	}
	if r.Status == link.Active && (r.URL == "" || !r.RedirectType.Valid()) {
		return fmt.Errorf("%w: version %d: active link without url or redirect type", errInvalid, r.Version)
	}
	if err := link.CheckExtras(r.Extras); err != nil {
		return fmt.Errorf("%w: version %d: %v", errInvalid, r.Version, err)
	}
	return nil
}

// ValidRequest reports whether a request names a code an edge may ask about.
func ValidRequest(code []byte) bool { return link.ValidCodeSyntax(code) }
