package apiwire

// Webhook endpoints and events on the wire (docs/webhooks.md): what
// /api/v1/webhooks answers, and the bodies control POSTs to endpoints.

// WebhookEndpoint is a tenant's webhook endpoint as the API answers it.
// The signing secret is never in it: it is shown once, by the create and
// the rotation (WebhookSecret). DisabledAt and DisabledReason are null
// while the endpoint is enabled; FailingSince is when the current run of
// failed attempts began (null when the last attempt succeeded).
type WebhookEndpoint struct {
	ID                      string   `json:"id"`
	URL                     string   `json:"url"`
	Description             string   `json:"description"`
	EventTypes              []string `json:"event_types"`
	Enabled                 bool     `json:"enabled"`
	DisabledReason          *string  `json:"disabled_reason"`
	DisabledAt              *string  `json:"disabled_at"`
	FailingSince            *string  `json:"failing_since"`
	ConsecutiveFailures     int      `json:"consecutive_failures"`
	LastSuccessAt           *string  `json:"last_success_at"`
	PreviousSecretExpiresAt *string  `json:"previous_secret_expires_at"`
	CreatedAt               string   `json:"created_at"`
	UpdatedAt               string   `json:"updated_at"`
}

// WebhookEndpointList is the answer of GET /api/v1/webhooks, oldest
// first.
type WebhookEndpointList struct {
	Endpoints []WebhookEndpoint `json:"endpoints"`
}

// WebhookSecret is the answer of a create and of a secret rotation: the
// endpoint and its new signing secret (whsec_ and base64 of 32 bytes),
// shown this once.
type WebhookSecret struct {
	Endpoint WebhookEndpoint `json:"endpoint"`
	Secret   string          `json:"secret"`
}

// WebhookDelivery is one delivery attempt of an event to an endpoint.
// Outcome is succeeded or failed; StatusCode is null when no answer came
// (a timeout, a refused connection); NextAttemptAt is when the event is
// tried again, null after a success or the last attempt.
type WebhookDelivery struct {
	ID            string  `json:"id"`
	EventID       string  `json:"event_id"`
	EventType     string  `json:"event_type"`
	Attempt       int     `json:"attempt"`
	Outcome       string  `json:"outcome"`
	StatusCode    *int    `json:"status_code"`
	LatencyMS     int     `json:"latency_ms"`
	Error         *string `json:"error"`
	ResponseBody  *string `json:"response_body"`
	NextAttemptAt *string `json:"next_attempt_at"`
	AttemptedAt   string  `json:"attempted_at"`
}

// WebhookDeliveryPage is a page of an endpoint's delivery log, newest
// first; NextCursor is null on the last page.
type WebhookDeliveryPage struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
	NextCursor *string           `json:"next_cursor"`
}

// WebhookTest is the answer of POST /api/v1/webhooks/{id}/test: the id of
// the webhook.test event queued for the endpoint.
type WebhookTest struct {
	EventID string `json:"event_id"`
}

// WebhookEvent is the body of every webhook POST: the event's id (also the
// webhook-id header; the same on every attempt), its type, when it
// happened, the tenant, and its data: a Link for link.created,
// link.updated and link.deleted, a ClicksAggregated for clicks.aggregated,
// a WebhookTestData for webhook.test.
type WebhookEvent[T any] struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	TenantID  int64  `json:"tenant_id"`
	Data      T      `json:"data"`
}

// ClicksAggregated is the data of a clicks.aggregated event: the clicks
// control recorded for the tenant's links from PeriodStart to PeriodEnd
// (a minute, longer after an outage), bots included in Clicks and counted
// apart in BotClicks. Top holds the most clicked links (at most the
// server's limit, 100 by default), most first; Other sums the rest.
type ClicksAggregated struct {
	PeriodStart string        `json:"period_start"`
	PeriodEnd   string        `json:"period_end"`
	Clicks      int64         `json:"clicks"`
	BotClicks   int64         `json:"bot_clicks"`
	Links       int64         `json:"links"`
	Top         []LinkClicks  `json:"top"`
	Other       ClicksSummary `json:"other"`
}

// LinkClicks is one link's clicks in a clicks.aggregated event.
type LinkClicks struct {
	Domain    string `json:"domain"`
	Code      string `json:"code"`
	ShortURL  string `json:"short_url"`
	Clicks    int64  `json:"clicks"`
	BotClicks int64  `json:"bot_clicks"`
}

// ClicksSummary sums the links a clicks.aggregated event does not list.
type ClicksSummary struct {
	Links     int64 `json:"links"`
	Clicks    int64 `json:"clicks"`
	BotClicks int64 `json:"bot_clicks"`
}

// WebhookTestData is the data of a webhook.test event.
type WebhookTestData struct {
	EndpointID string `json:"endpoint_id"`
	Message    string `json:"message"`
}
