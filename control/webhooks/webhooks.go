// Package webhooks sends a tenant's link and click events to the HTTPS
// endpoints it registers (docs/webhooks.md), Standard Webhooks style:
//
//   - Events are written in the same transaction as what they describe:
//     link events by triggers on links and link_tags (schema 018), click
//     aggregates by the click roller's exactly-once transaction into
//     webhook_click_counts, which the ClickAggregator turns into one
//     clicks.aggregated event per tenant a minute. They wait in
//     webhook_outbox until the Publisher has them on the WEBHOOKS stream,
//     with the event id as JetStream's de-duplication id.
//   - The Dispatcher runs a durable JetStream consumer per enabled endpoint
//     (filtered to the tenant's subscribed event types), so one failing or
//     slow endpoint holds up only its own events. Each attempt is a signed
//     POST (webhook-id, webhook-timestamp, webhook-signature: HMAC-SHA256
//     over "id.timestamp.body"), recorded in the delivery log before the
//     message is acknowledged; a failure is retried with exponential
//     backoff and jitter (NakWithDelay) over about three days, and an
//     endpoint that fails without a break for DisablePolicy.After is
//     disabled until its tenant enables it again.
//   - At most one succeeded delivery per (endpoint, event id) is recorded,
//     by a unique index, and an event whose delivery log says it succeeded
//     is acknowledged without another POST. What remains is the window
//     between an endpoint's 2xx and the commit of its log row: a crash
//     there sends the event again, with the same webhook-id.
//
// The Service is what the API drives: endpoints, secrets, the delivery
// log and test events.
package webhooks

import (
	"errors"
	"slices"
	"time"
)

// EventType is what an event says happened.
type EventType string

// The event types an endpoint may subscribe to, and the test event, which
// goes only to the endpoint it was sent to, whatever it subscribes to.
const (
	LinkCreated      EventType = "link.created"
	LinkUpdated      EventType = "link.updated"
	LinkDeleted      EventType = "link.deleted"
	ClicksAggregated EventType = "clicks.aggregated"
	TestEvent        EventType = "webhook.test"
)

// EventTypes are the types an endpoint may subscribe to, in the order the
// API lists them.
var EventTypes = []EventType{LinkCreated, LinkUpdated, LinkDeleted, ClicksAggregated}

// ValidEventType reports whether t is one an endpoint may subscribe to.
func ValidEventType(t string) bool { return slices.Contains(EventTypes, EventType(t)) }

// Endpoint is a tenant's webhook endpoint as the store holds it.
type Endpoint struct {
	ID          string
	TenantID    int64
	URL         string
	Description string
	EventTypes  []string
	// Secret signs every attempt; PrevSecret also signs until
	// PrevExpiresAt (zero: none), so receivers can switch over.
	Secret, PrevSecret []byte
	PrevExpiresAt      time.Time
	Enabled            bool
	DisabledReason     string
	DisabledAt         time.Time
	// Generation names the endpoint's current consumer; ResumeFrom is
	// where that consumer starts on the stream.
	Generation          int
	ResumeFrom          time.Time
	FailingSince        time.Time
	LastFailureAt       time.Time
	ConsecutiveFailures int
	LastSuccessAt       time.Time
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Subscribed reports whether the endpoint takes events of type t: the
// types it subscribes to, and test events.
func (e *Endpoint) Subscribed(t EventType) bool {
	return t == TestEvent || slices.Contains(e.EventTypes, string(t))
}

// SigningKeys are the secrets that sign an attempt at now: the current
// one, and the previous one during its grace period.
func (e *Endpoint) SigningKeys(now time.Time) [][]byte {
	keys := [][]byte{e.Secret}
	if len(e.PrevSecret) > 0 && now.Before(e.PrevExpiresAt) {
		keys = append(keys, e.PrevSecret)
	}
	return keys
}

// Delivery is one attempt in the delivery log.
type Delivery struct {
	ID            int64
	EndpointID    string
	EventID       string
	EventType     string
	Attempt       int
	Succeeded     bool
	StatusCode    int // 0: no answer
	Latency       time.Duration
	Error         string
	ResponseBody  string
	NextAttemptAt time.Time // zero: none
	AttemptedAt   time.Time
}

// Limits of endpoints (docs/webhooks.md, "Limits").
const (
	MaxURLLen         = 2048
	MaxDescriptionLen = 256
	// DefaultMaxEndpoints is how many endpoints a tenant may have unless
	// the operator says otherwise.
	DefaultMaxEndpoints = 10
	// MaxGrace bounds how long a rotated-out secret keeps signing.
	MaxGrace = 7 * 24 * time.Hour
	// DefaultGrace is that time when a rotation names none.
	DefaultGrace = 24 * time.Hour
)

// Errors of the store and the service. The API maps ErrNotFound to 404 and
// ErrTooMany to 409; input errors are link.ErrInvalidInput.
var (
	ErrNotFound = errors.New("no such webhook endpoint")
	ErrTooMany  = errors.New("too many webhook endpoints")
)
