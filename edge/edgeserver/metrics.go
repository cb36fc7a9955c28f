package edgeserver

import (
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelink/edgelink/edge/snapsync"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/edge/unlock"
	"github.com/edgelink/edgelink/shared/prom"
)

// newRegistry exports the edge's counters. Every series is created here,
// once: each reads an atomic the hot path already updates, so the redirect
// path does no label lookup and allocates nothing for metrics. Labels are
// only outcome and layer.
func newRegistry(e *Edge, nc *nats.Conn) *prometheus.Registry {
	reg := prom.NewRegistry()
	h, r, a, c := &e.Handler.Counters, e.Resolver, e.Authority, e.Clicks
	counter := func(name, help string, v func() float64, labels ...string) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constLabels(labels)}, v))
	}
	gauge := func(name, help string, v func() float64, labels ...string) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: constLabels(labels)}, v))
	}
	u := func(x *atomic.Uint64) func() float64 { return func() float64 { return float64(x.Load()) } }
	// family registers name's counters, one a value of label.
	family := func(name, help, label string, byValue map[string]*atomic.Uint64) {
		for value, x := range byValue {
			counter(name, help, u(x), label, value)
		}
	}

	const requests = "Answers by outcome: redirect (3xx), not_found (an unknown code: 404, or the domain's not-found redirect), gone (410), bad_method, bad_code (a path that is no code: 404 or the domain's not-found redirect), unknown_host (a host no active domain has: the platform's 404), rate_limited (429: a 404 past the client's budget of them), unavailable (503: the authority could not be asked in time)."
	family("edge_requests_total", requests, "outcome", map[string]*atomic.Uint64{
		"redirect": &h.Hits, "not_found": &h.NotFound, "gone": &h.Gone, "bad_method": &h.BadMethod,
		"bad_code": &h.BadCode, "unknown_host": &h.UnknownHost, "rate_limited": &h.Limited, "unavailable": &h.Unavailable,
	})
	const domainRedirects = "Answers by a domain's own redirects (302), by outcome: root (its root redirect for /), not_found (its not-found redirect for an unknown code, also counted in edge_requests_total as not_found or bad_code)."
	family("edge_domain_redirects_total", domainRedirects, "outcome", map[string]*atomic.Uint64{
		"root": &h.RootRedirects, "not_found": &h.NotFoundRedirects,
	})
	family("edge_rule_redirects_total", "Redirects of links with routing rules, by outcome: rule (a rule held and its target served), default (none held: the link's own target).", "outcome",
		map[string]*atomic.Uint64{"rule": &h.RuleHits, "default": &h.RuleDefaults})
	counter("edge_password_forms_total", "Password forms answered to GET or HEAD of a password-protected link without its unlock cookie.", u(&h.PasswordForms))
	family("edge_unlock_cookies_total", "Unlock cookies of password-protected links, by outcome: accepted (the link redirected), refused (expired, another link's, from before a password change or a key this edge lacks, forged: the form again).", "outcome",
		map[string]*atomic.Uint64{"accepted": &h.Unlocked, "refused": &h.CookiesRefused})
	family("edge_unlock_posts_refused_total", "Password form posts refused before any attempt, by cause: bad_form (no form, too large, malformed: 400, 413, 415), csrf (the form's token or cookie refused, expired, or a post from another site: 403).", "cause",
		map[string]*atomic.Uint64{"bad_form": &h.BadForms, "csrf": &h.FormsRefused})
	for _, o := range unlock.Outcomes() {
		counter("edge_unlock_attempts_total", "Password attempts, by outcome: right (303 with the unlock cookie), wrong (403), limited_client and limited_link (429: the client's or the link's attempts spent; nothing verified), busy (503: no verification slot freed in time), broken (503: the link's hash cannot be read).",
			u(&e.Unlock.Attempts[o]), "outcome", o.String())
	}
	lim := e.Limits
	family("edge_click_limit_refusals_total", "Redirects of links with a click limit answered 410 instead, by cause: reached (the change said the counted clicks reached the limit), spent (this edge's allowance of the link ran out before that change came), shared (the edges' reports, added up, showed the limit served). Also counted in edge_requests_total as gone.", "cause",
		map[string]*atomic.Uint64{"reached": &lim.Reached, "spent": &lim.Spent, "shared": &lim.Shared})
	gauge("edge_click_limited_links", "Links with a click limit this edge keeps an account of (its own redirects or other edges' reports).", func() float64 { return float64(lim.Remembered()) })
	var pub, recv, bad, failed = new(atomic.Uint64), new(atomic.Uint64), new(atomic.Uint64), new(atomic.Uint64)
	if s := e.Share; s != nil {
		pub, recv, bad, failed = &s.Published, &s.Received, &s.Bad, &s.Failed
	}
	family("edge_limit_reports_total", "Click limit reports (one link each) exchanged with the other edges over NATS, by outcome: published, received (another edge's, taken), bad (messages that did not decode, dropped), failed (publishes that failed; the next report carries the same totals). All 0 with --limit-report-every negative.", "outcome",
		map[string]*atomic.Uint64{"published": pub, "received": recv, "bad": bad, "failed": failed})

	d := e.Domains
	gauge("edge_domains", "Domains in the edge's table, removed ones included.", func() float64 { return float64(d.Len()) })
	gauge("edge_domain_table_received", "1 once the edge has a domain table (from a snapshot or the stream); 0 while it serves every host as the platform's domain (a control from before domains).", func() float64 {
		if d.Known() {
			return 1
		}
		return 0
	})
	gauge("edge_domains_undecodable", "Active FF1 domains whose key the edge's --code-keys file lacks: none of their misses is ruled out from memory, each is asked of the authority. Should be 0.", func() float64 { return float64(d.Undecodable()) })
	counter("edge_domains_refused_total", "Domain configurations (from a snapshot or the stream) refused as invalid; the domain keeps its previous state.", func() float64 { return float64(d.Refused.Load()) })
	hs := e.Hosts
	const hostAsks = "Hosts the domain table lacked, asked of the authority before any 404, by outcome: found (a domain the edge had not received yet: taken into the table), not_found (no active domain has it: the platform's 404; nothing is kept of it), failed (the authority could not tell, or its answer was refused: 503)."
	family("edge_host_asks_total", hostAsks, "outcome", map[string]*atomic.Uint64{
		"found": &hs.Found, "not_found": &hs.NotFound, "failed": &hs.Failed,
	})
	counter("edge_host_asks_refused_total", "Domain configurations from a host ask the table refused as invalid (answered 503; also counted as failed).", u(&hs.Refused))
	counter("edge_undecodable_misses_total", "Misses of a generated code's shape on an FF1 domain the edge cannot decode (edge_domains_undecodable): asked of the authority instead of ruled out.", u(&r.Undecodable))

	const hits = "Known links answered (302 or 410), by the layer that held them: overlay, snapshot, cache (long-tail), authority (asked over NATS: a link the edge had not received yet)."
	family("edge_hits_total", hits, "layer", map[string]*atomic.Uint64{
		"overlay": &h.OverlayHits, "snapshot": &h.SnapshotHits, "cache": &r.CacheHits,
	})
	// Resolved counts cache and authority finds; the cache's own count is
	// added first, so the difference may lag by the finds in flight: never
	// let it go back.
	var authorityHits atomic.Uint64
	counter("edge_hits_total", hits, func() float64 {
		cache := r.CacheHits.Load()
		v := h.Resolved.Load()
		if v > cache {
			v -= cache
		} else {
			v = 0
		}
		for {
			old := authorityHits.Load()
			if v <= old || authorityHits.CompareAndSwap(old, v) {
				return float64(max(v, old))
			}
		}
	}, "layer", "authority")

	const miss = "Misses of the overlay and snapshot, by how they were settled: snapshot (legacy: snapshot answers), cache, negative_cache (a cached 404 for a code that cannot be recent), bloom_reject (a sealed segment's code the hint rules out), frontier (above the allocation frontier's promised ceiling), authority (asked)."
	family("edge_miss_total", miss, "layer", map[string]*atomic.Uint64{
		"snapshot": &h.SnapshotHits, "cache": &r.CacheHits, "negative_cache": &r.NegativeHits,
		"bloom_reject": &r.BloomRejects, "frontier": &r.BeyondFrontier, "authority": &r.AuthorityAsked,
	})
	counter("edge_authority_fallback_failures_total", "Authority fallbacks that got no answer (timeout, busy, NATS or control down): answered 503, never a guessed 404.", u(&r.AuthorityFailed))

	counter("edge_authority_requests_total", "Authority round trips sent (each carries up to 128 codes and, when due, the frontier question).", u(&a.Requests))
	counter("edge_authority_questions_total", "Codes asked of the authority.", u(&a.Asked))
	counter("edge_authority_coalesced_total", "Asks that joined a question for the same code.", u(&a.Coalesced))
	counter("edge_authority_failures_total", "Authority round trips that failed or timed out.", u(&a.Failed))
	counter("edge_authority_busy_total", "Asks shed with 503 because no round trip slot freed up in time or too many waited.", u(&a.Busy))
	counter("edge_authority_promise_refreshes_total", "Answers that renewed the frontier's promise.", u(&a.Refreshes))
	gauge("edge_authority_promise_seconds", "How long the frontier's promise in hand still holds (0: none; unknown codes then need a round trip).", func() float64 {
		if p := a.Current(); p != nil {
			return max(time.Until(p.Until).Seconds(), 0)
		}
		return 0
	})

	counter("edge_clicks_recorded_total", "Clicks taken into the ring.", u(&c.Recorded))
	counter("edge_clicks_published_total", "Clicks published to the CLICKS stream.", u(&c.Published))
	counter("edge_clicks_dropped_total", "Clicks dropped: ring full or publish failed.", u(&c.Dropped))
	gauge("edge_clicks_buffered", "Clicks waiting to be published (what a kill would lose).", func() float64 { return float64(c.Buffered()) })
	family("edge_clicks_without_country_total", "Clicks encoded for publishing without a country, by cause: no_client (no usable client address), no_data (no country data: --geoip, --geoip-mmdb), unknown (the data has no country for the address).", "cause",
		map[string]*atomic.Uint64{"no_client": &c.NoClient, "no_data": &c.NoGeo, "unknown": &c.NoCountry})
	family("edge_clicks_without_visitor_total", "Clicks encoded for publishing without a visitor hash, by cause: no_client (no usable client address), no_salt (no salt for the click's UTC day: control has written none, or NATS was unreachable since the edge started).", "cause",
		map[string]*atomic.Uint64{"no_client": &c.NoClient, "no_salt": &c.NoSalt})
	vs := e.Salts
	gauge("edge_visitor_salts", "Days whose visitor salt the edge holds (normally 2 or 3: yesterday's until its grace ends, today's, tomorrow's).", func() float64 { return float64(vs.Len()) })
	counter("edge_visitor_salt_watch_failures_total", "Times the visitor salt bucket could not be opened or watched (retried every 5 s; the salts held are kept).", u(&vs.WatchFailures))
	counter("edge_visitor_salts_refused_total", "Entries of the visitor salt bucket that were no salt (a key naming no day, a value of the wrong length): ignored.", u(&vs.Refused))

	// Country lookups, one per click in the publisher: 0 without country
	// data (--geoip, --geoip-mmdb).
	geoKnown, geoUnknown := new(atomic.Uint64), new(atomic.Uint64)
	var geoGenerated float64
	if g := e.Countries; g != nil {
		geoKnown, geoUnknown = &g.Known, &g.Unknown
		if at := g.Table.Info().Generated; !at.IsZero() {
			geoGenerated = float64(at.Unix())
		}
	}
	family("edge_geo_lookups_total", "Clicks whose client address was looked up in the country data, by outcome: known (a country), unknown (private, reserved or unallocated, or a country the data does not know).", "outcome",
		map[string]*atomic.Uint64{"known": geoKnown, "unknown": geoUnknown})
	gauge("edge_geo_data_timestamp_seconds", "When the country data in use was generated (Unix seconds; 0 without country data or a date in it).", func() float64 { return geoGenerated })

	f := e.Feed
	gauge("edge_changefeed_applied_version", "Version of the last change applied.", func() float64 { return float64(f.Position().Version) })
	gauge("edge_changefeed_applied_sequence", "Stream sequence of the last change applied.", func() float64 { return float64(f.Position().Seq) })
	gauge("edge_changefeed_pending", "Stream messages (each a run of changes) not applied yet: the feed's lag.", func() float64 { return float64(f.Position().Pending) })
	counter("edge_changefeed_gaps_total", "Events whose predecessor was not applied (the edge re-syncs).", func() float64 { return float64(f.Position().Gaps) })
	counter("edge_changefeed_bad_events_total", "Undecodable change messages, skipped.", func() float64 { return float64(f.Position().Bad) })
	counter("edge_changefeed_bad_domain_events_total", "Domain events refused as invalid (the domain keeps its previous state).", func() float64 { return float64(f.Position().BadDomains) })
	gauge("edge_changefeed_last_applied_timestamp_seconds", "When the last change was applied (Unix seconds; 0 before any).", func() float64 {
		if t := f.Position().LastApplied; !t.IsZero() {
			return float64(t.UnixNano()) / 1e9
		}
		return 0
	})
	gauge("edge_store_entries", "Entries in the overlay.", func() float64 { return float64(e.Overlay.Len()) })
	overlay := func(f func(store.OverlayStats) int64) func() float64 {
		return func() float64 { return float64(f(e.Overlay.Stats())) }
	}
	const overlayBytes = "Bytes the overlay holds, by part: records (live and replaced, in arena chunks), garbage (the records among them replaced by newer versions, until a compaction), index (the slot tables)."
	gauge("edge_overlay_bytes", overlayBytes, overlay(func(s store.OverlayStats) int64 { return s.RecordBytes }), "part", "records")
	gauge("edge_overlay_bytes", overlayBytes, overlay(func(s store.OverlayStats) int64 { return s.Garbage }), "part", "garbage")
	gauge("edge_overlay_bytes", overlayBytes, overlay(func(s store.OverlayStats) int64 { return s.IndexBytes }), "part", "index")
	counter("edge_overlay_compactions_total", "Overlay shards rewritten without their replaced records.", func() float64 { return float64(e.Overlay.Stats().Compactions) })
	counter("edge_overlay_refused_total", "Changes the overlay could not hold (a code over 255 bytes, an unknown status, a shard's arena full): each is a link this edge cannot answer from memory. Should stay 0.", func() float64 { return float64(e.Overlay.Stats().Refused) })
	gauge("edge_sealed_intervals", "Sealed ID intervals known.", func() float64 { return float64(e.Segments.Intervals()) })
	gauge("edge_nats_connected", "1 while connected to NATS.", func() float64 {
		if nc.IsConnected() {
			return 1
		}
		return 0
	})
	snap := func(f func(version, entries uint64, bytes int) float64) func() float64 {
		return func() float64 {
			if l := e.Snapshots.Current(); l != nil {
				return f(l.Snap.Header.ChangeVersion, l.Snap.Header.Entries, l.Size)
			}
			return 0
		}
	}
	gauge("edge_snapshot_change_version", "Change version of the snapshot in use.", snap(func(v, _ uint64, _ int) float64 { return float64(v) }))
	gauge("edge_snapshot_entries", "Entries in the snapshot in use.", snap(func(_, n uint64, _ int) float64 { return float64(n) }))
	gauge("edge_snapshot_bytes", "Size of the snapshot in use.", snap(func(_, _ uint64, b int) float64 { return float64(b) }))
	counter("edge_snapshot_swaps_total", "Snapshots swapped in.", u(&e.Syncer.Swaps))
	counter("edge_snapshot_rejected_total", "Snapshots refused (digest, checksum, name).", u(&e.Syncer.Rejected))
	counter("edge_snapshot_resyncs_total", "Re-syncs from a snapshot after the feed lost events.", u(&e.Syncer.Resyncs))
	const state = "1 for the state of the snapshot in service, 0 for the others: none (none in service yet), unverified (a local copy opened in place, its entry sections not checked), verifying (serving while they are checked in the background), verified, withdrawn (it failed verification and was taken out of service: lookups go to the authority and readiness fails until a good one is fetched)."
	for st := snapsync.StateNone; st < snapsync.NumStates; st++ {
		gauge("edge_snapshot_state", state, func() float64 {
			if e.Syncer.State() == st {
				return 1
			}
			return 0
		}, "state", st.String())
	}
	gauge("edge_snapshot_locked", "1 while the snapshot in service is locked in memory (snapsync.Config.LockSnapshot): the kernel cannot reclaim its pages.", func() float64 {
		if l := e.Snapshots.Current(); l != nil && l.Snap.Locked() {
			return 1
		}
		return 0
	})
	counter("edge_snapshot_withdrawals_total", "Snapshots taken out of service because their background verification failed (a local copy damaged on disk).", u(&e.Syncer.Withdrawals))
	counter("edge_snapshot_refetches_total", "Good snapshots fetched and put in service in place of a withdrawn one.", u(&e.Syncer.Refetches))
	return reg
}

func constLabels(kv []string) prometheus.Labels {
	if len(kv) == 0 {
		return nil
	}
	l := prometheus.Labels{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}
