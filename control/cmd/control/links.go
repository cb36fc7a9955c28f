package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/apiclient"
)

// apiFlags are how the API commands reach control: its creator API and a
// tenant's key. They need no database credentials.
type apiFlags struct {
	APIURL string `name:"api-url" default:"http://127.0.0.1:8080" env:"EDGELINK_API_URL" help:"Base URL of control's creator API."`
	APIKey string `name:"api-key" env:"EDGELINK_API_KEY" help:"The tenant's API key (prefer the environment variable: flags show in ps)."`
	JSON   bool   `name:"json" help:"Print JSON instead of text."`
}

func (f apiFlags) client() (*apiclient.Client, error) {
	c, err := apiclient.New(f.APIURL, f.APIKey)
	if err != nil {
		return nil, usageError{err}
	}
	c.Attempts = 3 // a person is waiting; an import raises it
	return c, nil
}

type linksCmd struct {
	apiFlags
	Domain  string          `name:"domain" placeholder:"HOST" help:"The domain the links are on: one of the tenant's (control domains list), a host; default: the platform's. Codes are unique per domain, so the same code on two domains is two links. With list: only that domain's links (default: every domain's)."`
	Create  linksCreateCmd  `cmd:"" help:"Create a short link."`
	List    linksListCmd    `cmd:"" help:"List your links, newest first, a page at a time (--all for every page)."`
	Get     linksGetCmd     `cmd:"" help:"Show one of your links."`
	Disable linksDisableCmd `cmd:"" help:"Disable a link: it answers 410 on every edge until enabled again (PATCH status)."`
	Enable  linksEnableCmd  `cmd:"" help:"Enable a disabled link: it redirects again on every edge (PATCH status)."`
	Delete  linksDeleteCmd  `cmd:"" help:"Delete a link for good: it answers 410 on every edge and its code is never handed out again."`
	Tag     linksTagCmd     `cmd:"" help:"Add and remove tags on one or more links at once, all or nothing."`
	QR      linksQRCmd      `cmd:"" name:"qr" help:"Write a link's short URL as a QR code (PNG or SVG) to a file or stdout."`
	Set     linksSetCmd     `cmd:"" help:"Change a link's routing rules, password or click limit (PATCH): set, replace or remove each."`
}

type linksCreateCmd struct {
	URL            string        `arg:"" help:"Target URL (http or https)."`
	Code           string        `help:"Custom code: 4-32 characters of 0-9A-Za-z-_ (6-character alphanumeric codes are left to the generator)."`
	RedirectType   int           `name:"redirect-type" help:"301, 302 (default), 307 or 308."`
	ExpiresAt      string        `name:"expires-at" help:"Expiry, RFC 3339 (e.g. 2030-01-02T15:04:05Z)."`
	ExpiresIn      time.Duration `name:"expires-in" help:"Expiry relative to now (e.g. 72h); instead of --expires-at."`
	Namespace      string        `help:"ID namespace (default: the API's default)."`
	Title          string        `help:"The link's title (at most 256 characters, one line)."`
	Tags           []string      `name:"tag" help:"A tag (repeat, or separate with commas; at most 20): lower-cased, spaces made '-'."`
	IdempotencyKey string        `name:"idempotency-key" help:"Make the create safe to retry: the same key and request answer the original link; the CLI retries 429/503 and network errors only with a key."`
	ruleFlags
	MaxClicks int64 `name:"max-clicks" help:"Stop redirecting (410) after this many counted clicks, within the tolerance of docs/click-limits.md."`
}

type linksGetCmd struct {
	Code string `arg:"" help:"The link's code."`
}

type linksDisableCmd struct {
	Code string `arg:"" help:"The link's code."`
}

type linksEnableCmd struct {
	Code string `arg:"" help:"The link's code."`
}

type linksDeleteCmd struct {
	Code string `arg:"" help:"The link's code."`
}

// client is the API client of the links commands, on --domain's links.
func (l *linksCmd) client() (*apiclient.Client, error) {
	c, err := l.apiFlags.client()
	if err != nil {
		return nil, err
	}
	return c.WithDomain(l.Domain), nil
}

func (c *linksCreateCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	return runLinksCreate(ctx, l, *c, stdout)
}

func (c *linksGetCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	return runLinksGet(ctx, l, c.Code, stdout)
}

func (c *linksDisableCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	return runLinksDisable(ctx, l, c.Code, stdout)
}

func (c *linksEnableCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	cl, err := l.client()
	if err != nil {
		return err
	}
	li, err := cl.Patch(ctx, c.Code, map[string]any{"status": "active"})
	if err != nil {
		return fmt.Errorf("links enable %s: %w", c.Code, err)
	}
	return l.show(stdout, fmt.Sprintf("enabled %s: it redirects again on the edges", li.ShortURL), li)
}

func (c *linksDeleteCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	cl, err := l.client()
	if err != nil {
		return err
	}
	if err := cl.Delete(ctx, c.Code); err != nil {
		return fmt.Errorf("links delete %s: %w", c.Code, err)
	}
	if l.JSON {
		out := map[string]any{"code": c.Code, "status": "deleted"}
		if l.Domain != "" {
			out["domain"] = l.Domain
		}
		return printJSON(stdout, out)
	}
	on := ""
	if l.Domain != "" {
		on = " on " + l.Domain
	}
	fmt.Fprintf(stdout, "deleted %s%s: it answers 410 on the edges, and its code is never handed out again\n", c.Code, on)
	return nil
}

func runLinksCreate(ctx context.Context, f *linksCmd, c linksCreateCmd, stdout io.Writer) error {
	cl, err := f.client()
	if err != nil {
		return err
	}
	req := apiclient.CreateRequest{URL: c.URL, Code: c.Code, RedirectType: c.RedirectType, Namespace: c.Namespace, ExpiresAt: c.ExpiresAt,
		Title: c.Title, Tags: c.Tags, MaxClicks: c.MaxClicks}
	if req.Rules, req.Password, err = c.ruleFlags.read("links create"); err != nil {
		return err
	}
	if c.ExpiresIn != 0 {
		if c.ExpiresAt != "" {
			return usageError{errors.New("links create: give --expires-at or --expires-in, not both")}
		}
		if c.ExpiresIn < 0 {
			return usageError{errors.New("links create: --expires-in must be positive")}
		}
		req.ExpiresAt = time.Now().Add(c.ExpiresIn).UTC().Format(time.RFC3339)
	}
	l, replayed, err := cl.Create(ctx, req, c.IdempotencyKey)
	if err != nil {
		return fmt.Errorf("links create: %w", err)
	}
	verb := "created"
	if replayed {
		verb = "already created (same idempotency key)"
	}
	return f.show(stdout, fmt.Sprintf("%s %s -> %s", verb, l.ShortURL, l.URL), l)
}

func runLinksGet(ctx context.Context, f *linksCmd, code string, stdout io.Writer) error {
	cl, err := f.client()
	if err != nil {
		return err
	}
	l, err := cl.Get(ctx, code)
	if err != nil {
		return fmt.Errorf("links get %s: %w", code, err)
	}
	return f.show(stdout, "", l)
}

func runLinksDisable(ctx context.Context, f *linksCmd, code string, stdout io.Writer) error {
	cl, err := f.client()
	if err != nil {
		return err
	}
	l, err := cl.Patch(ctx, code, map[string]any{"status": "disabled"})
	if err != nil {
		return fmt.Errorf("links disable %s: %w", code, err)
	}
	return f.show(stdout, fmt.Sprintf("disabled %s: it answers 410 on the edges", l.ShortURL), l)
}

// show prints l: as JSON with --json, else headline (when there is one)
// and then its fields.
func (f apiFlags) show(w io.Writer, headline string, l *apiclient.Link) error {
	if f.JSON {
		return printJSON(w, l)
	}
	if headline != "" {
		fmt.Fprintln(w, headline)
	}
	printLink(w, l)
	return nil
}

func printLink(w io.Writer, l *apiclient.Link) {
	expires := "never"
	if l.ExpiresAt != nil {
		expires = *l.ExpiresAt
	}
	rows := [][2]string{
		{"code", l.Code}, {"domain", l.Domain}, {"short_url", l.ShortURL}, {"url", l.URL},
		{"redirect_type", fmt.Sprint(l.RedirectType)}, {"status", l.Status}, {"namespace", l.Namespace},
		{"expires_at", expires}, {"version", fmt.Sprint(l.Version)}, {"created_at", l.CreatedAt}, {"updated_at", l.UpdatedAt},
	}
	if l.URLOriginal != l.URL {
		rows = append(rows[:4], append([][2]string{{"url_original", l.URLOriginal}}, rows[4:]...)...)
	}
	if l.Title != nil {
		rows = append(rows, [2]string{"title", *l.Title})
	}
	if len(l.Tags) > 0 {
		rows = append(rows, [2]string{"tags", strings.Join(l.Tags, ", ")})
	}
	rows = append(rows, extrasRows(l)...) // links_rules.go
	for _, r := range rows {
		fmt.Fprintf(w, "  %-14s %s\n", r[0], r[1])
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// thousands formats n with commas: 1234567 → 1,234,567.
func thousands[T ~int | ~int64 | ~uint64](n T) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
