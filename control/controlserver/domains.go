package controlserver

import (
	"context"
	"fmt"
	"net/url"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// prepareDomains readies the domains before anything serves: the
// platform's domain takes the host of PublicURL (a change is published like
// any), and every active FF1 domain's current key, and the key new domains
// get, must be in the key file, or control would answer their creates with
// errors. Errors name domains and key names, never key bytes.
func prepareDomains(ctx context.Context, store *postgres.Store, keys *ff1.Keys, cfg Config) error {
	if cfg.DomainKey != "" && !keys.Has(cfg.DomainKey) {
		return fmt.Errorf("domain key %q is not in the code key file %q", cfg.DomainKey, cfg.CodeKeysFile)
	}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || u.Hostname() == "" {
			return fmt.Errorf("public url %q: no host", cfg.PublicURL)
		}
		host, err := link.CanonicalHost(u.Hostname())
		if err != nil {
			return fmt.Errorf("public url %q: %w", cfg.PublicURL, err)
		}
		if _, err := store.EnsureDefaultDomain(ctx, host); err != nil {
			return fmt.Errorf("platform domain %s: %w", host, err)
		}
	}
	all, err := store.Domains(ctx, 0)
	if err != nil {
		return fmt.Errorf("read domains: %w", err)
	}
	for _, d := range all {
		if d.Status != link.DomainActive || d.CodeMode != link.CodesFF1 {
			continue
		}
		if len(d.KeyIDs) == 0 || !keys.Has(d.KeyIDs[0]) {
			key := ""
			if len(d.KeyIDs) > 0 {
				key = d.KeyIDs[0]
			}
			return fmt.Errorf("domain %s: its code key %q is not in the code key file %q (--code-keys); add it, or control cannot make its codes", d.Host, key, cfg.CodeKeysFile)
		}
	}
	return nil
}
