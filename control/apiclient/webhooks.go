package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/edgelink/edgelink/control/apiwire"
)

// Webhook endpoints (/api/v1/webhooks; docs/webhooks.md).

// WebhookEndpoint is an endpoint as the API answers it.
type WebhookEndpoint = apiwire.WebhookEndpoint

// WebhookSecret is an endpoint with its signing secret, shown once.
type WebhookSecret = apiwire.WebhookSecret

// WebhookDeliveryPage is a page of an endpoint's delivery log.
type WebhookDeliveryPage = apiwire.WebhookDeliveryPage

// WebhookCreate is a new endpoint's body.
type WebhookCreate struct {
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description,omitempty"`
}

func webhookPath(id, suffix string) string { return "/api/v1/webhooks/" + url.PathEscape(id) + suffix }

// CreateWebhook registers an endpoint. It is not retried: a retry after a
// lost answer would make a second endpoint.
func (c *Client) CreateWebhook(ctx context.Context, in WebhookCreate) (*WebhookSecret, error) {
	out := new(WebhookSecret)
	if _, err := c.do(ctx, http.MethodPost, "/api/v1/webhooks", in, "", false, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Webhooks lists the tenant's endpoints.
func (c *Client) Webhooks(ctx context.Context) ([]WebhookEndpoint, error) {
	var l apiwire.WebhookEndpointList
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/webhooks", nil, "", true, &l); err != nil {
		return nil, err
	}
	return l.Endpoints, nil
}

// Webhook reads one endpoint.
func (c *Client) Webhook(ctx context.Context, id string) (*WebhookEndpoint, error) {
	out := new(WebhookEndpoint)
	if _, err := c.do(ctx, http.MethodGet, webhookPath(id, ""), nil, "", true, out); err != nil {
		return nil, err
	}
	return out, nil
}

// PatchWebhook changes an endpoint's url, description or event_types;
// setting them again is harmless, so it is retried.
func (c *Client) PatchWebhook(ctx context.Context, id string, fields map[string]any) (*WebhookEndpoint, error) {
	out := new(WebhookEndpoint)
	if _, err := c.do(ctx, http.MethodPatch, webhookPath(id, ""), fields, "", true, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteWebhook deletes an endpoint and its delivery log.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, webhookPath(id, ""), nil, "", false, nil)
	return err
}

// RotateWebhookSecret gives an endpoint a new secret; the old one signs
// beside it for graceSeconds (nil: the server's default). Not retried: a
// retry would rotate again and lose the first new secret.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string, graceSeconds *int64) (*WebhookSecret, error) {
	body := map[string]any{}
	if graceSeconds != nil {
		body["grace_seconds"] = *graceSeconds
	}
	out := new(WebhookSecret)
	if _, err := c.do(ctx, http.MethodPost, webhookPath(id, "/rotate-secret"), body, "", false, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SetWebhookEnabled enables or disables an endpoint (idempotent, so
// retried).
func (c *Client) SetWebhookEnabled(ctx context.Context, id string, enabled bool) (*WebhookEndpoint, error) {
	action := "/disable"
	if enabled {
		action = "/enable"
	}
	out := new(WebhookEndpoint)
	if _, err := c.do(ctx, http.MethodPost, webhookPath(id, action), nil, "", true, out); err != nil {
		return nil, err
	}
	return out, nil
}

// TestWebhook queues a webhook.test event for the endpoint and returns its
// id.
func (c *Client) TestWebhook(ctx context.Context, id string) (string, error) {
	var out apiwire.WebhookTest
	if _, err := c.do(ctx, http.MethodPost, webhookPath(id, "/test"), nil, "", false, &out); err != nil {
		return "", err
	}
	return out.EventID, nil
}

// DeliveryQuery filters a page of the delivery log; empty fields are not
// sent.
type DeliveryQuery struct {
	Limit   int
	Cursor  string
	EventID string
	Outcome string // succeeded or failed
}

// WebhookDeliveries reads a page of an endpoint's delivery log.
func (c *Client) WebhookDeliveries(ctx context.Context, id string, q DeliveryQuery) (*WebhookDeliveryPage, error) {
	v := url.Values{}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	for name, val := range map[string]string{"cursor": q.Cursor, "event_id": q.EventID, "outcome": q.Outcome} {
		if val != "" {
			v.Set(name, val)
		}
	}
	path := webhookPath(id, "/deliveries")
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	out := new(WebhookDeliveryPage)
	if _, err := c.do(ctx, http.MethodGet, path, nil, "", true, out); err != nil {
		return nil, err
	}
	return out, nil
}
