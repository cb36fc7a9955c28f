package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// domainsCmd is the operator's view of domains: any tenant's, and the
// platform's settings, straight from the database (tenants manage their
// own through the API, /api/v1/domains).
type domainsCmd struct {
	Add    domainsAddCmd    `cmd:"" help:"Add a domain (a host) to a tenant, and print how to point its DNS at the edges."`
	List   domainsListCmd   `cmd:"" help:"List the domains: every tenant's (or --tenant's), then the platform's."`
	Show   domainsShowCmd   `cmd:"" help:"Show one domain: its owner, redirects, robots.txt, code mode and key names."`
	Set    domainsSetCmd    `cmd:"" help:"Change a domain's redirects, robots.txt or FF1 key (the platform's domain too); edges apply it from the stream."`
	Remove domainsRemoveCmd `cmd:"" help:"Remove a domain: its host answers 404 on every edge; its links stay, and its codes are never handed out again."`
}

// domainAdmin is what the domains commands need of control/domains.
type domainAdmin interface {
	Create(ctx context.Context, tenantID int64, in domains.Input) (link.Domain, error)
	Update(ctx context.Context, tenantID int64, host string, p domains.Patch) (link.Domain, error)
	Remove(ctx context.Context, tenantID int64, host string) (link.Domain, error)
	List(ctx context.Context, tenantID int64) ([]link.Domain, error)
	Get(ctx context.Context, tenantID int64, host string) (link.Domain, error)
}

// operator is the domain service's tenant ID for the operator, who may
// see and change every domain.
const operator int64 = 0

// keyFlags are what serve's flags of the same names give the domain
// service: the FF1 key file and the key name new FF1 domains get, and the
// policy redirects pass (the links' target policy).
type keyFlags struct {
	CodeKeys       string   `name:"code-keys" env:"EDGELINK_CODE_KEYS" help:"The FF1 key file control and the edges read (lines: name base64-key); an ff1 domain's key must be in it. Only key names are ever printed."`
	DomainKey      string   `name:"domain-key" env:"EDGELINK_DOMAIN_KEY" help:"The key name new FF1 domains get unless --key names another (serve's --domain-key)."`
	BlockedDomains []string `name:"blocked-domains" env:"EDGELINK_BLOCKED_DOMAINS" help:"Target domains redirects may not lead to, as serve's."`
	AllowPrivate   bool     `name:"allow-private-targets" env:"EDGELINK_ALLOW_PRIVATE_TARGETS" help:"Let redirects lead to private addresses, as serve's."`
}

// domainService is the domain service over st, with the key file and the
// redirect policy of k.
func domainService(st *postgres.Store, k keyFlags) (domainAdmin, error) {
	var keys *ff1.Keys
	if k.CodeKeys != "" {
		var err error
		if keys, err = ff1.LoadKeys(k.CodeKeys); err != nil {
			return nil, usageError{fmt.Errorf("--code-keys: %w", err)}
		}
	}
	return domains.New(st, domains.Config{Keys: keys, DefaultKey: k.DomainKey,
		Targets: links.TargetPolicy{Blocked: lower(k.BlockedDomains), AllowPrivate: k.AllowPrivate}}), nil
}

// needKeys refuses an ff1 key choice without the key file it is checked
// against.
func (k keyFlags) needKeys(cmd string) error {
	if k.CodeKeys == "" {
		return usageError{fmt.Errorf("%s: an ff1 domain's key must be in the key file: give --code-keys (or EDGELINK_CODE_KEYS), the file control and the edges read", cmd)}
	}
	return nil
}

// withDomains opens the database and runs fn with the domain service.
func withDomains(ctx context.Context, g *globals, k keyFlags, fn func(st *postgres.Store, svc domainAdmin) error) error {
	return withStore(ctx, g.DatabaseURL, func(st *postgres.Store) error {
		svc, err := domainService(st, k)
		if err != nil {
			return err
		}
		return fn(st, svc)
	})
}

// domainFlags are a domain's settings as add and set take them; a nil
// field is not given (set keeps it).
type domainFlags struct {
	RootRedirect     *string `name:"root-redirect" placeholder:"URL" help:"Where / on the domain redirects (302); empty: 404."`
	NotFoundRedirect *string `name:"not-found-redirect" placeholder:"URL" help:"Where an unknown code on the domain redirects (302); empty: 404."`
	RobotsFile       string  `name:"robots-file" type:"existingfile" placeholder:"FILE" help:"The domain's robots.txt (at most 4096 bytes); default: everything disallowed."`
}

// robots reads --robots-file; nil when it is not given.
func (f domainFlags) robots() (*string, error) {
	if f.RobotsFile == "" {
		return nil, nil
	}
	st, err := os.Stat(f.RobotsFile)
	if err != nil {
		return nil, usageError{fmt.Errorf("--robots-file: %w", err)}
	}
	if st.Size() > link.MaxRobotsLen {
		return nil, usageError{fmt.Errorf("--robots-file %s: %d bytes; a robots.txt is at most %d", f.RobotsFile, st.Size(), link.MaxRobotsLen)}
	}
	b, err := os.ReadFile(f.RobotsFile)
	if err != nil {
		return nil, usageError{fmt.Errorf("--robots-file: %w", err)}
	}
	s := string(b)
	return &s, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// hostArg is a command's HOST argument, canonical.
func hostArg(cmd, raw string) (string, error) {
	h, err := link.CanonicalHost(raw)
	if err != nil {
		return "", usageError{fmt.Errorf("%s %q: %w", cmd, raw, err)}
	}
	return h, nil
}

type domainsAddCmd struct {
	database
	keyFlags
	Host     string `arg:"" help:"The host (e.g. go.acme.com); an internationalized name is stored as punycode."`
	Tenant   string `required:"" help:"The tenant that owns it (control tenants list)."`
	CodeMode string `name:"code-mode" enum:"ff1,sequential" default:"ff1" help:"How generated codes are made: ff1 (a keyed permutation nobody can enumerate) or sequential (000001, 000002, ...)."`
	Key      string `placeholder:"NAME" help:"The FF1 key's name in the key file; default: --domain-key."`
	JSON     bool   `name:"json" help:"Print JSON instead of text."`
	domainFlags
}

func (c *domainsAddCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	host, err := hostArg("domains add", c.Host)
	if err != nil {
		return err
	}
	robots, err := c.robots()
	if err != nil {
		return err
	}
	mode := link.CodeMode(c.CodeMode)
	key := c.Key
	if mode == link.CodesSequential {
		if key != "" {
			return usageError{errors.New("domains add: --key is for ff1 domains; a sequential one has no key")}
		}
	} else if err := c.needKeys("domains add"); err != nil {
		return err
	}
	return withDomains(ctx, g, c.keyFlags, func(st *postgres.Store, svc domainAdmin) error {
		tenant, err := st.TenantByName(ctx, c.Tenant)
		if err != nil {
			return tenantError("domains add", c.Tenant, err)
		}
		d, err := svc.Create(ctx, tenant, domains.Input{Host: host, RootRedirect: deref(c.RootRedirect), NotFoundRedirect: deref(c.NotFoundRedirect),
			Robots: deref(robots), CodeMode: mode, KeyID: key})
		if err != nil {
			return domainError("domains add", host, err)
		}
		if c.JSON {
			return printJSON(stdout, jsonDomain(d, map[int64]string{tenant: c.Tenant}))
		}
		fmt.Fprintf(stdout, "domain %s added for tenant %q (domain %d, %s)\n", d.Host, c.Tenant, d.ID, codesText(d))
		printDNS(ctx, stdout, svc, d.Host)
		return nil
	})
}

// printDNS says how to point host at the edges: a CNAME to the platform's
// host, which already reaches them.
func printDNS(ctx context.Context, w io.Writer, svc domainAdmin, host string) {
	target := "the host of control's --public-url"
	if ds, err := svc.List(ctx, operator); err == nil {
		for _, d := range ds {
			if d.ID == link.DefaultDomain && d.Host != "platform.invalid" {
				target = d.Host + "."
			}
		}
	}
	fmt.Fprintf(w, `next, point its DNS at the edges:
  %s.  CNAME  %s
  (or A/AAAA records of the edges' or their load balancer's addresses; a zone apex cannot have a CNAME)
and, for https, make the edges' certificate cover %s. The edges answer the host as soon as they
apply the change; until DNS points there its links are made but not reached.
`, host, target, host)
}

func codesText(d link.Domain) string {
	if d.CodeMode == link.CodesFF1 && len(d.KeyIDs) > 0 {
		return fmt.Sprintf("ff1 codes, key %s", d.KeyIDs[0])
	}
	return string(d.CodeMode) + " codes"
}

type domainsListCmd struct {
	database
	keyFlags
	Tenant string `help:"Only this tenant's domains (and the platform's)."`
	JSON   bool   `name:"json" help:"Print JSON instead of a table."`
}

func (c *domainsListCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return withDomains(ctx, g, c.keyFlags, func(st *postgres.Store, svc domainAdmin) error {
		names, err := tenantNames(ctx, st)
		if err != nil {
			return fmt.Errorf("domains list: %w", err)
		}
		who := operator
		if c.Tenant != "" {
			if who, err = st.TenantByName(ctx, c.Tenant); err != nil {
				return tenantError("domains list", c.Tenant, err)
			}
		}
		ds, err := svc.List(ctx, who)
		if err != nil {
			return fmt.Errorf("domains list: %w", err)
		}
		if c.JSON {
			out := make([]domainJSON, len(ds))
			for i, d := range ds {
				out[i] = jsonDomain(d, names)
			}
			return printJSON(stdout, out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tID\tTENANT\tCODES\tKEYS\tSTATUS\tROOT\tNOT FOUND")
		for _, d := range ds {
			keys := strings.Join(d.KeyIDs, ",")
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Host, d.ID, ownerText(d, names), d.CodeMode, orDash(keys),
				d.Status, orDash(d.RootRedirect), orDash(d.NotFoundRedirect))
		}
		return tw.Flush()
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ownerText(d link.Domain, names map[int64]string) string {
	if d.ID == link.DefaultDomain {
		return "(platform)"
	}
	if n, ok := names[d.TenantID]; ok {
		return n
	}
	return fmt.Sprintf("#%d", d.TenantID)
}

// tenantNames maps tenant IDs to names.
func tenantNames(ctx context.Context, st *postgres.Store) (map[int64]string, error) {
	ts, err := st.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[int64]string, len(ts))
	for _, t := range ts {
		m[t.ID] = t.Name
	}
	return m, nil
}

// domainJSON is a domain as the domains commands print it with --json:
// the API's fields, and what only the operator sees (the owner, the key
// names; never key bytes, which no command reads out).
type domainJSON struct {
	Host             string   `json:"host"`
	ID               uint32   `json:"id"`
	Platform         bool     `json:"platform"`
	TenantID         *int64   `json:"tenant_id"`
	Tenant           *string  `json:"tenant"`
	RootRedirect     *string  `json:"root_redirect"`
	NotFoundRedirect *string  `json:"not_found_redirect"`
	Robots           *string  `json:"robots"`
	CodeMode         string   `json:"code_mode"`
	KeyIDs           []string `json:"key_ids"`
	Status           string   `json:"status"`
	Version          uint64   `json:"version"`
}

func jsonDomain(d link.Domain, names map[int64]string) domainJSON {
	out := domainJSON{Host: d.Host, ID: uint32(d.ID), Platform: d.ID == link.DefaultDomain, CodeMode: string(d.CodeMode),
		KeyIDs: append([]string{}, d.KeyIDs...), Status: string(d.Status), Version: d.Version}
	if d.ID != link.DefaultDomain {
		out.TenantID = &d.TenantID
		if n, ok := names[d.TenantID]; ok {
			out.Tenant = &n
		}
	}
	for _, f := range []struct {
		v   string
		dst **string
	}{{d.RootRedirect, &out.RootRedirect}, {d.NotFoundRedirect, &out.NotFoundRedirect}, {d.Robots, &out.Robots}} {
		if f.v != "" {
			v := f.v
			*f.dst = &v
		}
	}
	return out
}

type domainsShowCmd struct {
	database
	keyFlags
	Host string `arg:"" help:"The domain's host."`
	JSON bool   `name:"json" help:"Print JSON instead of text."`
}

func (c *domainsShowCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	host, err := hostArg("domains show", c.Host)
	if err != nil {
		return err
	}
	return withDomains(ctx, g, c.keyFlags, func(st *postgres.Store, svc domainAdmin) error {
		d, err := svc.Get(ctx, operator, host)
		if err != nil {
			return domainError("domains show", host, err)
		}
		names, err := tenantNames(ctx, st)
		if err != nil {
			return fmt.Errorf("domains show: %w", err)
		}
		return showDomain(stdout, c.JSON, "", d, names)
	})
}

// showDomain prints d: as JSON, else headline (when there is one) and its
// fields.
func showDomain(w io.Writer, asJSON bool, headline string, d link.Domain, names map[int64]string) error {
	if asJSON {
		return printJSON(w, jsonDomain(d, names))
	}
	if headline != "" {
		fmt.Fprintln(w, headline)
	}
	robots := "(default: everything disallowed)"
	if d.Robots != "" {
		robots = fmt.Sprintf("%d bytes:\n%s", len(d.Robots), indent(d.Robots, "                     "))
	}
	for _, r := range [][2]string{
		{"host", d.Host}, {"id", fmt.Sprint(d.ID)}, {"tenant", ownerText(d, names)}, {"status", string(d.Status)},
		{"code_mode", string(d.CodeMode)}, {"key_ids", orDash(strings.Join(d.KeyIDs, ", "))},
		{"root_redirect", orDash(d.RootRedirect)}, {"not_found_redirect", orDash(d.NotFoundRedirect)},
		{"robots", robots}, {"version", fmt.Sprint(d.Version)},
	} {
		fmt.Fprintf(w, "  %-18s %s\n", r[0], r[1])
	}
	return nil
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix)
}

type domainsSetCmd struct {
	database
	keyFlags
	Host          string `arg:"" help:"The domain's host (the platform's too)."`
	DefaultRobots bool   `name:"default-robots" help:"Serve the default robots.txt again (everything disallowed)."`
	Key           string `placeholder:"NAME" help:"Rotate the FF1 key: new codes use NAME; edges keep ruling out codes of the earlier keys, which stay behind it."`
	JSON          bool   `name:"json" help:"Print JSON instead of text."`
	domainFlags
}

func (c *domainsSetCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	host, err := hostArg("domains set", c.Host)
	if err != nil {
		return err
	}
	robots, err := c.robots()
	if err != nil {
		return err
	}
	if c.DefaultRobots {
		if robots != nil {
			return usageError{errors.New("domains set: give --robots-file or --default-robots, not both")}
		}
		robots = new(string)
	}
	p := domains.Patch{RootRedirect: c.RootRedirect, NotFoundRedirect: c.NotFoundRedirect, Robots: robots}
	if c.Key != "" {
		if err := c.needKeys("domains set --key"); err != nil {
			return err
		}
		p.KeyID = &c.Key
	}
	if p.RootRedirect == nil && p.NotFoundRedirect == nil && p.Robots == nil && p.KeyID == nil {
		return usageError{errors.New("domains set: give --root-redirect, --not-found-redirect, --robots-file, --default-robots or --key")}
	}
	return withDomains(ctx, g, c.keyFlags, func(st *postgres.Store, svc domainAdmin) error {
		d, err := svc.Update(ctx, operator, host, p)
		if err != nil {
			return domainError("domains set", host, err)
		}
		names, err := tenantNames(ctx, st)
		if err != nil {
			return fmt.Errorf("domains set: %w", err)
		}
		return showDomain(stdout, c.JSON, fmt.Sprintf("domain %s changed (version %d): edges apply it from the stream", d.Host, d.Version), d, names)
	})
}

type domainsRemoveCmd struct {
	database
	keyFlags
	Host string `arg:"" help:"The domain's host."`
}

func (c *domainsRemoveCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	host, err := hostArg("domains remove", c.Host)
	if err != nil {
		return err
	}
	return withDomains(ctx, g, c.keyFlags, func(st *postgres.Store, svc domainAdmin) error {
		d, err := svc.Remove(ctx, operator, host)
		if err != nil {
			return domainError("domains remove", host, err)
		}
		fmt.Fprintf(stdout, "domain %s removed: every edge answers its host 404 once it applies the change; its links stay, and its codes are never handed out again\n", d.Host)
		return nil
	})
}

// domainError says what went wrong with the domain host in words of its
// own; errors.Is still sees err, for the exit code.
func domainError(cmd, host string, err error) error {
	switch {
	case errors.Is(err, link.ErrNotFound):
		return explained{fmt.Sprintf("%s: no domain %s (control domains list shows them)", cmd, host), err}
	case errors.Is(err, link.ErrDomainTaken):
		return explained{fmt.Sprintf("%s: %s is a domain already (control domains show %s)", cmd, host, host), err}
	}
	return fmt.Errorf("%s: %w", cmd, err)
}
