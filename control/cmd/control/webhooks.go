package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/controlserver"
)

// webhooksCmd manages the tenant's webhook endpoints through the creator
// API (docs/webhooks.md).
type webhooksCmd struct {
	apiFlags
	Create     webhooksCreateCmd     `cmd:"" help:"Register an endpoint (https on a public address) for event types; prints its signing secret, shown this once."`
	List       webhooksListCmd       `cmd:"" help:"List your endpoints."`
	Get        webhooksGetCmd        `cmd:"" help:"Show one endpoint: its events, state and run of failures."`
	Update     webhooksUpdateCmd     `cmd:"" help:"Change an endpoint's URL, description or event types."`
	Delete     webhooksDeleteCmd     `cmd:"" help:"Delete an endpoint and its delivery log."`
	Rotate     webhooksRotateCmd     `cmd:"" name:"rotate-secret" help:"Give an endpoint a new signing secret; the old one keeps signing beside it for --grace."`
	Enable     webhooksEnableCmd     `cmd:"" help:"Enable an endpoint: events from now on are delivered (not those of the disabled period)."`
	Disable    webhooksDisableCmd    `cmd:"" help:"Disable an endpoint: nothing is sent to it until it is enabled."`
	Test       webhooksTestCmd       `cmd:"" help:"Send an endpoint a webhook.test event, delivered like any event."`
	Deliveries webhooksDeliveriesCmd `cmd:"" help:"An endpoint's delivery log, newest attempt first."`
}

type webhooksCreateCmd struct {
	URL         string   `arg:"" help:"The endpoint's URL."`
	Events      []string `name:"event" required:"" help:"An event type (repeat, or separate with commas): link.created, link.updated, link.deleted, clicks.aggregated."`
	Description string   `help:"What the endpoint is (at most 256 characters)."`
}

type webhooksListCmd struct{}

type webhookIDArg struct {
	ID string `arg:"" help:"The endpoint's id (ep_…)."`
}

type webhooksGetCmd struct{ webhookIDArg }

type webhooksUpdateCmd struct {
	webhookIDArg
	URL         *string  `name:"url" help:"A new URL."`
	Description *string  `help:"A new description."`
	Events      []string `name:"event" help:"The new event types (repeat, or separate with commas); replaces them all."`
}

type webhooksDeleteCmd struct{ webhookIDArg }

type webhooksRotateCmd struct {
	webhookIDArg
	Grace time.Duration `default:"24h" help:"How long the old secret keeps signing beside the new one (0 to 168h)."`
}

type webhooksEnableCmd struct{ webhookIDArg }
type webhooksDisableCmd struct{ webhookIDArg }
type webhooksTestCmd struct{ webhookIDArg }

type webhooksDeliveriesCmd struct {
	webhookIDArg
	Limit   int    `default:"20" help:"Attempts per page (1 to 100)."`
	Cursor  string `help:"The page after this cursor (printed at the end of a page)."`
	EventID string `name:"event-id" help:"Only this event's attempts."`
	Outcome string `enum:",succeeded,failed" default:"" help:"Only succeeded or failed attempts."`
}

func (w *webhooksCmd) show(out io.Writer, e *apiclient.WebhookEndpoint, secret string) error {
	if w.JSON {
		if secret != "" {
			return printJSON(out, apiclient.WebhookSecret{Endpoint: *e, Secret: secret})
		}
		return printJSON(out, e)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\nurl\t%s\nevents\t%s\n", e.ID, e.URL, strings.Join(e.EventTypes, ", "))
	if e.Description != "" {
		fmt.Fprintf(tw, "description\t%s\n", e.Description)
	}
	state := "enabled"
	if !e.Enabled {
		state = "disabled since " + deref(e.DisabledAt) + ": " + deref(e.DisabledReason)
	}
	fmt.Fprintf(tw, "state\t%s\n", state)
	if e.FailingSince != nil {
		fmt.Fprintf(tw, "failing\tsince %s, %d attempts in a row\n", *e.FailingSince, e.ConsecutiveFailures)
	}
	if e.PreviousSecretExpiresAt != nil {
		fmt.Fprintf(tw, "old secret\tsigns too until %s\n", *e.PreviousSecretExpiresAt)
	}
	if secret != "" {
		fmt.Fprintf(tw, "secret\t%s\t(shown this once: keep it where the receiver can read it)\n", secret)
	}
	return tw.Flush()
}

func (c *webhooksCreateCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	s, err := cl.CreateWebhook(ctx, apiclient.WebhookCreate{URL: c.URL, EventTypes: splitList(c.Events), Description: c.Description})
	if err != nil {
		return fmt.Errorf("webhooks create: %w", err)
	}
	return w.show(out, &s.Endpoint, s.Secret)
}

func (c *webhooksListCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	es, err := cl.Webhooks(ctx)
	if err != nil {
		return fmt.Errorf("webhooks list: %w", err)
	}
	if w.JSON {
		return printJSON(out, es)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tFAILURES\tEVENTS\tURL")
	for _, e := range es {
		state := "enabled"
		if !e.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.ID, state, e.ConsecutiveFailures, strings.Join(e.EventTypes, ","), e.URL)
	}
	return tw.Flush()
}

func (c *webhooksGetCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	e, err := cl.Webhook(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("webhooks get %s: %w", c.ID, err)
	}
	return w.show(out, e, "")
}

func (c *webhooksUpdateCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	fields := map[string]any{}
	if c.URL != nil {
		fields["url"] = *c.URL
	}
	if c.Description != nil {
		fields["description"] = *c.Description
	}
	if len(c.Events) > 0 {
		fields["event_types"] = splitList(c.Events)
	}
	if len(fields) == 0 {
		return usageError{fmt.Errorf("webhooks update: nothing to change; give --url, --description or --event")}
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	e, err := cl.PatchWebhook(ctx, c.ID, fields)
	if err != nil {
		return fmt.Errorf("webhooks update %s: %w", c.ID, err)
	}
	return w.show(out, e, "")
}

func (c *webhooksDeleteCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	if err := cl.DeleteWebhook(ctx, c.ID); err != nil {
		return fmt.Errorf("webhooks delete %s: %w", c.ID, err)
	}
	if w.JSON {
		return printJSON(out, map[string]any{"id": c.ID, "deleted": true})
	}
	fmt.Fprintf(out, "deleted %s and its delivery log\n", c.ID)
	return nil
}

func (c *webhooksRotateCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	if c.Grace < 0 || c.Grace > 7*24*time.Hour || c.Grace%time.Second != 0 {
		return usageError{fmt.Errorf("webhooks rotate-secret: --grace %v: want whole seconds from 0 to 168h", c.Grace)}
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	g := int64(c.Grace / time.Second)
	s, err := cl.RotateWebhookSecret(ctx, c.ID, &g)
	if err != nil {
		return fmt.Errorf("webhooks rotate-secret %s: %w", c.ID, err)
	}
	return w.show(out, &s.Endpoint, s.Secret)
}

func (c *webhooksEnableCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	return setWebhookEnabled(ctx, w, out, c.ID, true)
}

func (c *webhooksDisableCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	return setWebhookEnabled(ctx, w, out, c.ID, false)
}

func setWebhookEnabled(ctx context.Context, w *webhooksCmd, out io.Writer, id string, enabled bool) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	e, err := cl.SetWebhookEnabled(ctx, id, enabled)
	if err != nil {
		return fmt.Errorf("webhooks enable/disable %s: %w", id, err)
	}
	return w.show(out, e, "")
}

func (c *webhooksTestCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	id, err := cl.TestWebhook(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("webhooks test %s: %w", c.ID, err)
	}
	if w.JSON {
		return printJSON(out, map[string]string{"event_id": id})
	}
	fmt.Fprintf(out, "queued webhook.test event %s; see it with: control webhooks deliveries %s --event-id %s\n", id, c.ID, id)
	return nil
}

func (c *webhooksDeliveriesCmd) Run(ctx context.Context, w *webhooksCmd, out io.Writer) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	p, err := cl.WebhookDeliveries(ctx, c.ID, apiclient.DeliveryQuery{Limit: c.Limit, Cursor: c.Cursor, EventID: c.EventID, Outcome: c.Outcome})
	if err != nil {
		return fmt.Errorf("webhooks deliveries %s: %w", c.ID, err)
	}
	if w.JSON {
		return printJSON(out, p)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPTED\tEVENT\tTYPE\tTRY\tOUTCOME\tSTATUS\tMS\tNEXT\tERROR")
	for _, d := range p.Deliveries {
		status := "-"
		if d.StatusCode != nil {
			status = fmt.Sprint(*d.StatusCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", d.AttemptedAt, d.EventID, d.EventType, d.Attempt, d.Outcome,
			status, d.LatencyMS, orDash(deref(d.NextAttemptAt)), orDash(deref(d.Error)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.NextCursor != nil {
		fmt.Fprintf(out, "more: --cursor %s\n", *p.NextCursor)
	}
	return nil
}

// splitList is repeated flags that may also hold comma-separated values.
func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// webhookServe are serve's webhook flags.
type webhookServe struct {
	WebhooksAllowHTTP    bool          `name:"webhooks-allow-http" env:"EDGELINK_WEBHOOKS_ALLOW_HTTP" help:"Accept http:// webhook endpoints (development; by default https only)."`
	WebhooksAllowPrivate bool          `name:"webhooks-allow-private" env:"EDGELINK_WEBHOOKS_ALLOW_PRIVATE" help:"Send webhooks to loopback, private and link-local addresses (development; by default public addresses only, checked after DNS at every connection)."`
	WebhooksMaxEndpoints int           `name:"webhooks-max-endpoints" default:"10" env:"EDGELINK_WEBHOOKS_MAX_ENDPOINTS" help:"Webhook endpoints a tenant may have."`
	WebhooksTimeout      time.Duration `name:"webhooks-timeout" default:"10s" env:"EDGELINK_WEBHOOKS_TIMEOUT" help:"Bound of one webhook attempt, connection to last byte (1s to 30s)."`
	WebhooksStreamMaxAge time.Duration `name:"webhooks-stream-max-age" default:"96h" env:"EDGELINK_WEBHOOKS_STREAM_MAX_AGE" help:"How long the WEBHOOKS stream keeps an event (at least the retry schedule's 77h)."`
	WebhooksRetention    time.Duration `name:"webhooks-log-retention" default:"168h" env:"EDGELINK_WEBHOOKS_LOG_RETENTION" help:"How long the delivery log keeps an attempt (at least --webhooks-stream-max-age)."`
	WebhooksNoDelivery   bool          `name:"webhooks-no-delivery" env:"EDGELINK_WEBHOOKS_NO_DELIVERY" help:"Leave webhook delivery to other control instances (this one still publishes events and serves the API)."`
}

func (w webhookServe) config() (controlserver.WebhookConfig, error) {
	if w.WebhooksMaxEndpoints < 1 || w.WebhooksMaxEndpoints > 1000 {
		return controlserver.WebhookConfig{}, usageError{fmt.Errorf("--webhooks-max-endpoints %d: want 1 to 1000", w.WebhooksMaxEndpoints)}
	}
	if w.WebhooksTimeout < time.Second || w.WebhooksTimeout > 30*time.Second {
		return controlserver.WebhookConfig{}, usageError{fmt.Errorf("--webhooks-timeout %v: want 1s to 30s", w.WebhooksTimeout)}
	}
	if w.WebhooksRetention < w.WebhooksStreamMaxAge {
		return controlserver.WebhookConfig{}, usageError{fmt.Errorf("--webhooks-log-retention %v is below --webhooks-stream-max-age %v: the log is what keeps a redelivered event from being sent twice", w.WebhooksRetention, w.WebhooksStreamMaxAge)}
	}
	return controlserver.WebhookConfig{AllowHTTP: w.WebhooksAllowHTTP, AllowPrivate: w.WebhooksAllowPrivate,
		MaxEndpoints: w.WebhooksMaxEndpoints, Timeout: w.WebhooksTimeout, StreamMaxAge: w.WebhooksStreamMaxAge,
		LogRetention: w.WebhooksRetention, NoDelivery: w.WebhooksNoDelivery}, nil
}
