// Package linkevent is the change message on the stream: one versioned event
// per mutation, published by control's outbox relay and applied by edges.
// A stream message carries a run of consecutive events in the compact batch
// format (Batch, Decode); one JSON event per message (Marshal, Unmarshal) is
// the shape written before batching, which Decode still reads.
//
// Events carry the full state of what changed, never a delta, so an edge
// applies them by "last writer wins per code by version" and a duplicate or
// replayed event is harmless.
package linkevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/edgelink/edgelink/shared/link"
)

const (
	// Stream is the JetStream stream holding the change log.
	Stream = "LINK_CHANGES"
	// Subject is the one subject all changes go to, so the stream's order is
	// the relay's publish order (version order).
	Subject = "links.changes"
	// HeaderVersion is the header carrying the version of a message's last
	// event, so a reader learns the stream's newest version, and a snapshot
	// the version its stream position stands for, from headers alone.
	HeaderVersion = "Edgelink-Version"
)

// Kind says what an event describes.
type Kind string

const (
	KindLink    Kind = "link"
	KindSegment Kind = "segment"
	// KindDomain: a domain's whole configuration, as of Version.
	KindDomain Kind = "domain"
)

// Segment states.
const (
	SegmentOpened = "opened"
	SegmentSealed = "sealed"
)

// Event is one change. Version is the global change sequence value the
// mutation took; every event has a distinct version.
type Event struct {
	Version uint64 `json:"v"`
	// Prev is the version of the event published just before this one on
	// the stream (0 for the first), so a reader can prove it missed nothing
	// even though versions themselves have holes (rolled-back transactions).
	Prev uint64 `json:"p,omitempty"`
	Kind Kind   `json:"k"`

	// Link events. Domain and Code are the link's key.
	Domain       link.DomainID     `json:"d,omitempty"`
	Code         string            `json:"c,omitempty"`
	URL          string            `json:"u,omitempty"`
	RedirectType link.RedirectType `json:"t,omitempty"`
	Status       link.Status       `json:"s,omitempty"`
	// ExpiresAt is Unix milliseconds; 0 means never.
	ExpiresAt int64 `json:"e,omitempty"`
	// Extras are the link's routing rules, password hash and click limit
	// in their wire form (shared/link Extras; checked by link.CheckExtras);
	// "" for a plain link. Only the batch format carries them (from
	// FormatBatch 3 on): the JSON shape predates them, and Marshal refuses
	// an event that has them.
	Extras string `json:"-"`

	// Segment events: [SegStart, SegEnd) in Namespace.
	Namespace string `json:"ns,omitempty"`
	SegStart  uint64 `json:"ss,omitempty"`
	SegEnd    uint64 `json:"se,omitempty"`
	SegState  string `json:"st,omitempty"`

	// Domain events: the configuration (Conf.ID is the domain; Domain is
	// 0 or the same). Its Version is 0 or the event's: decoders set it to
	// the event's, the version edges compare a snapshot's domain table by.
	Conf *link.Domain `json:"dc,omitempty"`
}

// MsgID is the JetStream de-duplication id of the message whose first event
// has version v, so a relay that publishes a run from the same version twice
// stores it once.
func MsgID(v uint64) string { return "v" + strconv.FormatUint(v, 10) }

// Marshal encodes e as JSON after checking it is complete: one event per
// message, the shape controls wrote before batching (tests write it to prove
// edges still read it).
func Marshal(e *Event) ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	if e.Extras != "" {
		return nil, fmt.Errorf("%w: version %d: the JSON shape cannot carry extras", errInvalid, e.Version)
	}
	return json.Marshal(e)
}

// Unmarshal decodes and validates an event; a malformed event is an error,
// never a half-filled value. A domain event's Conf.Version is the event's
// Version, as every decoder gives it.
func Unmarshal(b []byte, e *Event) error {
	*e = Event{}
	if err := json.Unmarshal(b, e); err != nil {
		*e = Event{}
		return fmt.Errorf("linkevent: %w", err)
	}
	if err := e.validate(); err != nil {
		*e = Event{}
		return err
	}
	if e.Kind == KindDomain {
		e.Conf.Version = e.Version
	}
	return nil
}

var errInvalid = errors.New("linkevent: invalid event")

func (e *Event) validate() error {
	if e.Version == 0 || e.Prev >= e.Version {
		return fmt.Errorf("%w: version %d after %d", errInvalid, e.Version, e.Prev)
	}
	if e.Kind != KindLink && e.Extras != "" {
		return fmt.Errorf("%w: version %d: extras in a %s event", errInvalid, e.Version, e.Kind)
	}
	switch e.Kind {
	case KindLink:
		// Errors say what is wrong, never whose it is: they end up in
		// logs, which carry no code or URL.
		if !link.ValidCodeSyntax(e.Code) {
			return fmt.Errorf("%w: version %d: code of %d bytes is not a valid code", errInvalid, e.Version, len(e.Code))
		}
		if !e.Status.Valid() {
			return fmt.Errorf("%w: status %q", errInvalid, e.Status)
		}
		if e.Status == link.Active && (e.URL == "" || !e.RedirectType.Valid()) {
			return fmt.Errorf("%w: version %d: active link without url or redirect type", errInvalid, e.Version)
		}
		if e.Domain > link.MaxDomainID {
			return fmt.Errorf("%w: version %d: domain %d", errInvalid, e.Version, e.Domain)
		}
		if err := link.CheckExtras(e.Extras); err != nil {
			return fmt.Errorf("%w: version %d: %v", errInvalid, e.Version, err)
		}
	case KindDomain:
		if err := validateDomain(e); err != nil {
			return fmt.Errorf("%w: version %d: %s", errInvalid, e.Version, err)
		}
	case KindSegment:
		if e.Namespace == "" || e.SegStart == 0 || e.SegEnd <= e.SegStart {
			return fmt.Errorf("%w: segment [%d, %d) in %q", errInvalid, e.SegStart, e.SegEnd, e.Namespace)
		}
		if e.SegState != SegmentOpened && e.SegState != SegmentSealed {
			return fmt.Errorf("%w: segment state %q", errInvalid, e.SegState)
		}
	default:
		return fmt.Errorf("%w: kind %q", errInvalid, e.Kind)
	}
	return nil
}
