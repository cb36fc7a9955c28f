package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgelink/edgelink/control/postgres"
)

type tenantsCmd struct {
	Create    tenantsCreateCmd    `cmd:"" help:"Create a tenant and print its first API key."`
	SetLimits tenantsSetLimitsCmd `cmd:"" name:"set-limits" help:"Set a tenant's own request limit (or put it back to the server's default); every control instance applies it from the tenant's next request."`
	List      tenantsListCmd      `cmd:"" help:"List the tenants with their request limits (default: the server's --tenant-rate and --tenant-burst) and active keys."`
}

// limitFlags are a tenant's own limit as the tenants commands take it:
// a number, "default" (the server's), or nothing (unchanged).
type limitFlags struct {
	Rate  string `placeholder:"R" help:"Requests per second (above 0, at most 1000000), or default."`
	Burst string `placeholder:"B" help:"Requests at once (1 to 1000000), or default."`
}

// change parses the flags; a flag not given is a nil field.
func (f limitFlags) change() (postgres.LimitChange, error) {
	var c postgres.LimitChange
	if f.Rate != "" {
		r := 0.0
		if f.Rate != "default" {
			var err error
			r, err = strconv.ParseFloat(f.Rate, 64)
			if err != nil || math.IsNaN(r) || r <= 0 || r > postgres.MaxTenantRate {
				return c, usageError{fmt.Errorf("--rate %q: want requests per second above 0 and at most %d, or default", f.Rate, postgres.MaxTenantRate)}
			}
		}
		c.PerSecond = &r
	}
	if f.Burst != "" {
		b := 0
		if f.Burst != "default" {
			var err error
			b, err = strconv.Atoi(f.Burst)
			if err != nil || b < 1 || b > postgres.MaxTenantBurst {
				return c, usageError{fmt.Errorf("--burst %q: want a whole number of requests from 1 to %d, or default", f.Burst, postgres.MaxTenantBurst)}
			}
		}
		c.Burst = &b
	}
	return c, nil
}

type tenantsCreateCmd struct {
	database
	Name string `arg:"" help:"Tenant name (1-200 characters)."`
	limitFlags
}

func (c *tenantsCreateCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	ch, err := c.change()
	if err != nil {
		return err
	}
	var lim postgres.TenantLimits
	if ch.PerSecond != nil {
		lim.PerSecond = *ch.PerSecond
	}
	if ch.Burst != nil {
		lim.Burst = *ch.Burst
	}
	if err := postgres.ValidTenantName(c.Name); err != nil {
		return usageError{fmt.Errorf("tenants create: %w", err)}
	}
	return withStore(ctx, g.DatabaseURL, func(st *postgres.Store) error {
		id, key, err := st.CreateTenantWithLimits(ctx, c.Name, lim)
		if err != nil {
			return tenantError("tenants create", c.Name, err)
		}
		fmt.Fprintf(stdout, "tenant %q created (id %d), %s\napi key (shown once): %s\n", c.Name, id, describeLimits(lim), key)
		return nil
	})
}

type tenantsSetLimitsCmd struct {
	database
	Name string `arg:"" help:"Tenant name."`
	limitFlags
}

func (c *tenantsSetLimitsCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	ch, err := c.change()
	if err != nil {
		return err
	}
	if ch.PerSecond == nil && ch.Burst == nil {
		return usageError{errors.New("tenants set-limits: give --rate, --burst or both (a number, or default for the server's)")}
	}
	return withStore(ctx, g.DatabaseURL, func(st *postgres.Store) error {
		lim, err := st.SetTenantLimits(ctx, c.Name, ch)
		if err != nil {
			return tenantError("tenants set-limits", c.Name, err)
		}
		fmt.Fprintf(stdout, "tenant %q: %s, in force from its next request on every control instance\n", c.Name, describeLimits(lim))
		return nil
	})
}

type tenantsListCmd struct {
	database
	JSON bool `name:"json" help:"Print JSON instead of a table."`
}

// tenantJSON is a tenant as tenants list --json prints it; a null limit
// is the server's default.
type tenantJSON struct {
	ID            int64    `json:"id"`
	Name          string   `json:"name"`
	RatePerSecond *float64 `json:"rate_per_second"`
	Burst         *int     `json:"burst"`
	ActiveKeys    int      `json:"active_keys"`
	CreatedAt     string   `json:"created_at"`
}

func (c *tenantsListCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return withStore(ctx, g.DatabaseURL, func(st *postgres.Store) error {
		ts, err := st.Tenants(ctx)
		if err != nil {
			return fmt.Errorf("tenants list: %w", err)
		}
		if c.JSON {
			out := make([]tenantJSON, len(ts))
			for i, t := range ts {
				out[i] = tenantJSON{ID: t.ID, Name: t.Name, ActiveKeys: t.ActiveKeys, CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339)}
				if t.Limits.PerSecond > 0 {
					out[i].RatePerSecond = &t.Limits.PerSecond
				}
				if t.Limits.Burst > 0 {
					out[i].Burst = &t.Limits.Burst
				}
			}
			return printJSON(stdout, out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tRATE/S\tBURST\tKEYS\tCREATED")
		for _, t := range ts {
			rate, burst := limitText(t.Limits)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", t.Name, t.ID, rate, burst, t.ActiveKeys, t.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	})
}

// limitText is a limit's rate and burst as printed: "default" where the
// tenant has none of its own.
func limitText(l postgres.TenantLimits) (rate, burst string) {
	rate, burst = "default", "default"
	if l.PerSecond > 0 {
		rate = strconv.FormatFloat(l.PerSecond, 'f', -1, 64)
	}
	if l.Burst > 0 {
		burst = strconv.Itoa(l.Burst)
	}
	return rate, burst
}

func describeLimits(l postgres.TenantLimits) string {
	rate, burst := limitText(l)
	if l.PerSecond > 0 {
		rate += "/s"
	}
	return "rate " + rate + ", burst " + burst
}

type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Issue another API key for a tenant; it is shown once."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke an API key; its next request fails."`
}

type keysCreateCmd struct {
	database
	Tenant string `arg:"" help:"Tenant name."`
}

func (c *keysCreateCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return withStore(ctx, g.DatabaseURL, func(st *postgres.Store) error {
		id, err := st.TenantByName(ctx, c.Tenant)
		if err != nil {
			return tenantError("keys create", c.Tenant, err)
		}
		key, err := st.CreateAPIKey(ctx, id)
		if err != nil {
			return fmt.Errorf("keys create: %w", err)
		}
		fmt.Fprintf(stdout, "api key (shown once): %s\n", key)
		return nil
	})
}

type keysRevokeCmd struct {
	database
	Key string `arg:"" help:"The API key to revoke."`
}

func (c *keysRevokeCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return withStore(ctx, g.DatabaseURL, func(st *postgres.Store) error {
		err := st.RevokeAPIKey(ctx, c.Key)
		switch {
		case errors.Is(err, postgres.ErrNoKey):
			hint := "check that it was copied whole"
			if !strings.HasPrefix(c.Key, postgres.KeyPrefix) {
				hint = "keys start with " + postgres.KeyPrefix
			}
			return explained{fmt.Sprintf("keys revoke: no such API key (%s)", hint), err}
		case err != nil:
			return fmt.Errorf("keys revoke: %w", err)
		}
		fmt.Fprintln(stdout, "key revoked")
		return nil
	})
}

// tenantError says what went wrong with the tenant named name in words of
// its own; errors.Is still sees err, for the exit code.
func tenantError(cmd, name string, err error) error {
	switch {
	case errors.Is(err, postgres.ErrNoTenant):
		return explained{fmt.Sprintf("%s: no tenant named %q (control tenants list shows them)", cmd, name), err}
	case errors.Is(err, postgres.ErrTenantExists):
		return explained{fmt.Sprintf("%s: a tenant named %q exists already (control keys create %q issues it another key)", cmd, name, name), err}
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// serveLimits are serve's request limits: the default a tenant without its
// own gets, and the budget of failed authentications per client.
type serveLimits struct {
	TenantRate       float64 `name:"tenant-rate" default:"100" env:"EDGELINK_TENANT_RATE" help:"Requests per second a tenant may make to this instance unless it has a rate of its own (control tenants set-limits); negative: unlimited."`
	TenantBurst      int     `name:"tenant-burst" default:"200" env:"EDGELINK_TENANT_BURST" help:"Requests a tenant may make at once unless it has a burst of its own."`
	AuthFailureRate  float64 `name:"auth-failure-rate" default:"1" env:"EDGELINK_AUTH_FAILURE_RATE" help:"Failed authentications per second per client address (an IPv6 /64) before 429, answered without looking the key up; negative: no bound."`
	AuthFailureBurst int     `name:"auth-failure-burst" default:"20" env:"EDGELINK_AUTH_FAILURE_BURST" help:"Failed authentications a client address may make at once."`
}

func (l serveLimits) validate() error {
	switch {
	case l.TenantRate == 0 || math.IsNaN(l.TenantRate) || math.IsInf(l.TenantRate, 0):
		return usageError{errors.New("--tenant-rate must be above 0, or negative for no limit")}
	case l.TenantBurst < 1:
		return usageError{errors.New("--tenant-burst must be at least 1")}
	case l.AuthFailureRate == 0 || math.IsNaN(l.AuthFailureRate) || math.IsInf(l.AuthFailureRate, 0):
		return usageError{errors.New("--auth-failure-rate must be above 0, or negative for no bound")}
	case l.AuthFailureBurst < 1:
		return usageError{errors.New("--auth-failure-burst must be at least 1")}
	}
	return nil
}
