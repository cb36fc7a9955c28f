package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/shared/link"
)

// EndpointStore is what the Service needs of the authority. Every method
// takes the tenant and answers ErrNotFound for another tenant's endpoint
// exactly as for one that does not exist.
type EndpointStore interface {
	// CreateEndpoint stores e unless its tenant has max endpoints already
	// (ErrTooMany), decided under a lock of the tenant's row.
	CreateEndpoint(ctx context.Context, e *Endpoint, max int) error
	Endpoint(ctx context.Context, tenant int64, id string) (*Endpoint, error)
	// Endpoints are the tenant's, oldest first.
	Endpoints(ctx context.Context, tenant int64) ([]*Endpoint, error)
	// UpdateEndpoint applies p and returns the endpoint as it is then.
	UpdateEndpoint(ctx context.Context, tenant int64, id string, p Patch, now time.Time) (*Endpoint, error)
	// DeleteEndpoint removes the endpoint and its delivery log.
	DeleteEndpoint(ctx context.Context, tenant int64, id string) error
	// RotateSecret makes secret the signing key and keeps the current one
	// signing until prevUntil.
	RotateSecret(ctx context.Context, tenant int64, id string, secret []byte, prevUntil, now time.Time) (*Endpoint, error)
	// SetEnabled enables (a new generation whose consumer starts at now,
	// the run of failures forgotten) or disables (with reason) the
	// endpoint; either is a no-op when it already is so.
	SetEnabled(ctx context.Context, tenant int64, id string, enabled bool, reason string, now time.Time) (*Endpoint, error)
	// Deliveries is a page of the endpoint's log, newest first.
	Deliveries(ctx context.Context, tenant int64, id string, q DeliveryQuery) ([]Delivery, error)
}

// Patch is a change of an endpoint; nil fields are kept.
type Patch struct {
	URL         *string
	Description *string
	EventTypes  []string // nil: kept
}

// DeliveryQuery filters and pages a delivery log.
type DeliveryQuery struct {
	Before  int64  // only attempts with a smaller id (the cursor); 0: from the newest
	Limit   int    // at most this many
	EventID string // only this event's attempts ("" all)
	Outcome string // succeeded or failed ("" both)
}

// ServiceConfig tunes a Service.
type ServiceConfig struct {
	Policy       TargetPolicy
	MaxEndpoints int // per tenant (default DefaultMaxEndpoints)
	Now          func() time.Time
	// Changed is called after every change of an endpoint, so this
	// instance's dispatcher picks it up at once (Dispatcher.Changed).
	Changed func()
}

// Service is the webhook management the API drives. Safe for concurrent
// use.
type Service struct {
	store EndpointStore
	js    jetstream.JetStream
	cfg   ServiceConfig
}

// NewService returns a Service; js publishes test events.
func NewService(store EndpointStore, js jetstream.JetStream, cfg ServiceConfig) *Service {
	if cfg.MaxEndpoints <= 0 {
		cfg.MaxEndpoints = DefaultMaxEndpoints
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	return &Service{store: store, js: js, cfg: cfg}
}

// Input is a new endpoint.
type Input struct {
	URL         string
	Description string
	EventTypes  []string
}

// MaxEndpoints is how many endpoints a tenant may have.
func (s *Service) MaxEndpoints() int { return s.cfg.MaxEndpoints }

// ValidID reports whether id is an endpoint id's shape.
func ValidID(id string) bool {
	if len(id) != 27 || !strings.HasPrefix(id, "ep_") {
		return false
	}
	for _, c := range id[3:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func newID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new endpoint id: %w", err)
	}
	return "ep_" + hex.EncodeToString(b[:]), nil
}

// checkTypes normalizes a subscription: known types, each once, sorted.
func checkTypes(ts []string) ([]string, error) {
	if len(ts) == 0 {
		return nil, invalid("event_types is empty; subscribe to one or more of %s", typeList())
	}
	if len(ts) > 16 {
		return nil, invalid("event_types has %d entries; there are %d types", len(ts), len(EventTypes))
	}
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if !ValidEventType(t) {
			return nil, invalid("event type %.40q is not one of %s", t, typeList())
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

func typeList() string {
	s := make([]string, len(EventTypes))
	for i, t := range EventTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

func checkDescription(d string) error {
	if n := utf8.RuneCountInString(d); n > MaxDescriptionLen {
		return invalid("description is %d characters; at most %d", n, MaxDescriptionLen)
	}
	for _, r := range d {
		if r < ' ' || r == 0x7f {
			return invalid("description has a control character; write it on one line")
		}
	}
	return nil
}

// Create adds an endpoint for tenant and returns it with its signing key,
// which is shown this once.
func (s *Service) Create(ctx context.Context, tenant int64, in Input) (*Endpoint, []byte, error) {
	u, err := s.cfg.Policy.CheckURL(in.URL)
	if err != nil {
		return nil, nil, err
	}
	types, err := checkTypes(in.EventTypes)
	if err != nil {
		return nil, nil, err
	}
	if err := checkDescription(in.Description); err != nil {
		return nil, nil, err
	}
	id, err := newID()
	if err != nil {
		return nil, nil, err
	}
	key, err := NewSecret()
	if err != nil {
		return nil, nil, err
	}
	now := s.cfg.Now()
	e := &Endpoint{ID: id, TenantID: tenant, URL: u, Description: in.Description, EventTypes: types, Secret: key,
		Enabled: true, Generation: 1, ResumeFrom: now, CreatedAt: now, UpdatedAt: now}
	if err := s.store.CreateEndpoint(ctx, e, s.cfg.MaxEndpoints); err != nil {
		return nil, nil, err
	}
	s.cfg.Changed()
	return e, key, nil
}

// Get returns one of tenant's endpoints.
func (s *Service) Get(ctx context.Context, tenant int64, id string) (*Endpoint, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	return s.store.Endpoint(ctx, tenant, id)
}

// List returns tenant's endpoints, oldest first.
func (s *Service) List(ctx context.Context, tenant int64) ([]*Endpoint, error) {
	return s.store.Endpoints(ctx, tenant)
}

// Update changes an endpoint's URL, description or event types.
func (s *Service) Update(ctx context.Context, tenant int64, id string, p Patch) (*Endpoint, error) {
	if p.URL == nil && p.Description == nil && p.EventTypes == nil {
		return nil, invalid("nothing to change; send url, description or event_types")
	}
	if p.URL != nil {
		u, err := s.cfg.Policy.CheckURL(*p.URL)
		if err != nil {
			return nil, err
		}
		p.URL = &u
	}
	if p.EventTypes != nil {
		ts, err := checkTypes(p.EventTypes)
		if err != nil {
			return nil, err
		}
		p.EventTypes = ts
	}
	if p.Description != nil {
		if err := checkDescription(*p.Description); err != nil {
			return nil, err
		}
	}
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	e, err := s.store.UpdateEndpoint(ctx, tenant, id, p, s.cfg.Now())
	if err == nil {
		s.cfg.Changed()
	}
	return e, err
}

// Delete removes an endpoint and its log; its consumer goes with the next
// reconcile.
func (s *Service) Delete(ctx context.Context, tenant int64, id string) error {
	if !ValidID(id) {
		return ErrNotFound
	}
	err := s.store.DeleteEndpoint(ctx, tenant, id)
	if err == nil {
		s.cfg.Changed()
	}
	return err
}

// RotateSecret gives the endpoint a new signing key, returned this once;
// the current one keeps signing beside it for grace (0 to MaxGrace).
func (s *Service) RotateSecret(ctx context.Context, tenant int64, id string, grace time.Duration) (*Endpoint, []byte, error) {
	if grace < 0 || grace > MaxGrace {
		return nil, nil, invalid("grace must be 0 to %d seconds", int(MaxGrace.Seconds()))
	}
	if !ValidID(id) {
		return nil, nil, ErrNotFound
	}
	key, err := NewSecret()
	if err != nil {
		return nil, nil, err
	}
	now := s.cfg.Now()
	e, err := s.store.RotateSecret(ctx, tenant, id, key, now.Add(grace), now)
	if err != nil {
		return nil, nil, err
	}
	s.cfg.Changed()
	return e, key, nil
}

// SetEnabled enables or disables an endpoint. Enabling starts delivering
// the events that happen from then on; events of the disabled period are
// not sent (they stay on the stream for consumers of it).
func (s *Service) SetEnabled(ctx context.Context, tenant int64, id string, enabled bool) (*Endpoint, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	e, err := s.store.SetEnabled(ctx, tenant, id, enabled, "disabled through the API", s.cfg.Now())
	if err == nil {
		s.cfg.Changed()
	}
	return e, err
}

// Deliveries returns a page of an endpoint's delivery log.
func (s *Service) Deliveries(ctx context.Context, tenant int64, id string, q DeliveryQuery) ([]Delivery, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	return s.store.Deliveries(ctx, tenant, id, q)
}

// SendTest queues a webhook.test event for the endpoint alone and returns
// its id. It goes the way every event goes: signed, logged, retried.
func (s *Service) SendTest(ctx context.Context, tenant int64, id string) (string, error) {
	e, err := s.Get(ctx, tenant, id)
	if err != nil {
		return "", err
	}
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("test event id: %w", err)
	}
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80 // a version 4 UUID, as the outbox's
	evID := EventID(u)
	body, err := json.Marshal(apiwire.WebhookEvent[apiwire.WebhookTestData]{ID: evID, Type: string(TestEvent),
		Timestamp: rfc3339(s.cfg.Now()), TenantID: tenant,
		Data: apiwire.WebhookTestData{EndpointID: e.ID, Message: "a test event, sent on request"}})
	if err != nil {
		return "", err
	}
	msg := &nats.Msg{Subject: TestSubject(e.ID), Data: body, Header: nats.Header{}}
	msg.Header.Set(HeaderType, string(TestEvent))
	msg.Header.Set(HeaderTenant, fmt.Sprint(tenant))
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(evID)); err != nil {
		return "", fmt.Errorf("%w: queue test event: %w", link.ErrUnavailable, err)
	}
	return evID, nil
}
