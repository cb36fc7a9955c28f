// Package metrics is control's Prometheus metrics: the allocator's runway,
// latency, failures and waste, and the authority's capacity at the rate of
// committed creates (so that exhaustion is seen coming, load trouble is
// classified and waste is accounted for), the outbox relay, the authority
// responder, the click roller and the idempotency key purge. Values are read from the
// components' own counters at scrape time; labels are only namespace,
// class, cause, state and outcome, never a code, URL or key.
package metrics

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/responder"
	"github.com/edgelink/edgelink/shared/prom"
)

// Control holds one control instance's registry. Build it with New before
// the allocator (its ObserveLoad goes into idalloc.Config.OnLoad), then
// attach the components as they start. It is safe for concurrent use.
type Control struct {
	Registry *prometheus.Registry
	loadDur  *prometheus.HistogramVec

	mu       sync.Mutex
	capacity map[string]idalloc.Capacity // by namespace, refreshed by RunCapacity
	capErr   map[string]bool
}

// New returns a registry with the Go and process collectors and the
// allocation-latency histogram.
func New() *Control {
	c := &Control{
		Registry: prom.NewRegistry(),
		loadDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "control_idalloc_load_duration_seconds",
			Help:    "Segment lease transactions by outcome class (ok, lock_timeout, unavailable, commit_unknown, rejected, fenced, exhausted, other).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"namespace", "class"}),
		capacity: map[string]idalloc.Capacity{},
		capErr:   map[string]bool{},
	}
	c.Registry.MustRegister(c.loadDur)
	return c
}

// Handler serves the registry in the Prometheus text format.
func (c *Control) Handler() http.Handler {
	return promhttp.HandlerFor(c.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ObserveLoad records one lease attempt; it is idalloc.Config.OnLoad.
func (c *Control) ObserveLoad(namespace string, took time.Duration, class string) {
	if class == "" {
		class = "ok"
	}
	c.loadDur.WithLabelValues(namespace, class).Observe(took.Seconds())
}

// Sources are the components whose counters are exported; nil ones are
// left out.
type Sources struct {
	Alloc      *idalloc.Allocator
	Namespaces []string
	Links      *links.Service
	Relay      *outbox.Relay
	Responder  *responder.Responder
	Roller     *clickroll.Roller
	Replica    *responder.ReplicaFirst // nil without a read replica
	KeyPurge   *links.KeyPurge
}

// Attach registers the components' metrics.
func (c *Control) Attach(s Sources) {
	c.Registry.MustRegister(&collector{c: c, s: s})
}

// RunCapacity refreshes the authority's capacity accounting of namespaces
// every interval until ctx is done. It is read from the database, so the
// scrape itself never waits on it.
func (c *Control) RunCapacity(ctx context.Context, a *idalloc.Allocator, namespaces []string, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, ns := range namespaces {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			cp, err := a.Capacity(qctx, ns)
			cancel()
			c.mu.Lock()
			if err == nil {
				c.capacity[ns] = cp
			}
			failedBefore := c.capErr[ns]
			c.capErr[ns] = err != nil
			c.mu.Unlock()
			if err != nil && !failedBefore && ctx.Err() == nil && log != nil {
				log.Warn("capacity metrics: read failed; keeping the last values", "namespace", ns, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	dCurrent     = desc("control_idalloc_current_remaining_ids", "IDs left in the current segment.", "namespace")
	dStandby     = desc("control_idalloc_standby_remaining_ids", "IDs in the loaded standby segment (0 when none).", "namespace")
	dRunway      = desc("control_idalloc_runway_seconds", "Seconds the current plus standby IDs last at this instance's observed rate (+Inf when idle): alert on this, not on percentages.", "namespace")
	dRate        = desc("control_idalloc_rate_ids_per_second", "This instance's observed allocation rate (EWMA).", "namespace")
	dLoads       = desc("control_idalloc_segment_loads_total", "Segment lease attempts.", "namespace")
	dFailures    = desc("control_idalloc_load_failures_total", "Failed segment loads by class; class=\"fenced\" counts fence rejections.", "namespace", "class")
	dWaits       = desc("control_idalloc_next_waits_total", "Next calls that had to wait for a segment load (switch waits).", "namespace")
	dOpen        = desc("control_idalloc_open_segments", "Segments leased and not yet sealed.", "namespace")
	dSealed      = desc("control_idalloc_sealed_segments_total", "Segments this instance sealed.", "namespace")
	dWasted      = desc("control_idalloc_wasted_ids_total", "IDs this instance wasted, by cause: discarded (unused when a range was retired at shutdown or self-fence, never returned), uncommitted (handed out, create did not commit), stray_done.", "namespace", "cause")
	dSwept       = desc("control_idalloc_swept_segments_total", "Open segments of silent instances sealed by this instance's sweeper (their unused IDs are waste).")
	dPending     = desc("control_idalloc_pending_unknown_lease", "1 while a lease request's outcome is unknown (retried by the same request id, never guessed).", "namespace")
	dFenced      = desc("control_idalloc_fenced", "1 while allocation is fenced: the authority's high-water mark is not provable.", "namespace")
	dExhausted   = desc("control_idalloc_exhausted", "1 once the namespace's last ID has been leased.", "namespace")
	dCapacity    = desc("control_idalloc_capacity_ids", "The authority's space accounting by state: committed, wasted, reserved, remaining, total (refreshed periodically).", "namespace", "state")
	dDaysLeft    = desc("control_idalloc_capacity_days_left", "Remaining IDs at the recent rate of committed creates (control_idalloc_create_rate_per_second), in days (+Inf without creates).", "namespace")
	dCreateRate  = desc("control_idalloc_create_rate_per_second", "Committed creates per second, every instance's, as the authority counts them: the busier of the last 5 minutes and the last hour (refreshed every 30 s). Segment leases are not creates.", "namespace")
	dKeysPurged  = desc("control_idempotency_keys_purged_total", "Expired idempotency keys this instance deleted.")
	dCodeSkips   = desc("control_links_generated_codes_skipped_total", "Generated IDs skipped (waste), by cause: taken (a link held their code already), reserved (their code is a reserved word).", "cause")
	dSharedTx    = desc("control_links_create_transactions_total", "Create transactions (coalesced creates share one).")
	dCoalesced   = desc("control_links_coalesced_creates_total", "Creates carried by shared transactions.")
	dPublished   = desc("control_outbox_published_total", "Outbox events published to the change stream.")
	dGapWaits    = desc("control_outbox_gap_waits_total", "Times the relay waited for a version hole to resolve.")
	dRelaySkip   = desc("control_outbox_skipped_total", "Outbox versions the relay skipped as rolled back.")
	dRelayPurged = desc("control_outbox_purged_total", "Outbox rows this instance's relay deleted: published, and older than the change stream's retention.")
	dRelayVer    = desc("control_outbox_published_version", "Newest change version on the change stream as this instance's relay last saw it; edges' edge_changefeed_applied_version below it is their lag.")
	dRelayAt     = desc("control_outbox_last_publish_timestamp_seconds", "When this instance's relay last published (0: never).")
	dRelayActive = desc("control_outbox_relay_active", "1 while this instance holds the relay lock (one instance publishes at a time).")
	dReplica     = desc("control_authority_replica_lookups_total", "Edge lookups with a read replica configured, by source: replica (answered there), primary (asked of the primary after a replica miss, error or timeout), fallback_found (the primary found what the replica missed: replica lag), replica_failed.", "source")
	dWitnessSkip = desc("control_idalloc_witness_skipped_total", "Leases made without the high-water witness (best-effort mode while NATS is unreachable): a failover then would go unseen.", "namespace")
	dAuthAnswers = desc("control_authority_lookups_total", "Codes edges asked about, by outcome: found, not_found (404); and messages failed (answered unavailable) or invalid.", "outcome")
	dQuestions   = desc("control_authority_questions_total", "Edge questions (messages of up to 128 codes) answered.")
	dFrontiers   = desc("control_authority_frontier_reads_total", "Edge questions that read the allocation frontier (renewing edges' promise).")
	dRollClicks  = desc("control_clickroll_clicks_total", "Clicks applied to the rollups.")
	dRollLost    = desc("control_clickroll_messages_lost_total", "CLICKS messages the stream discarded before they were read.")
	dRollPos     = desc("control_clickroll_position", "Last CLICKS stream sequence applied.")
	dRollPruned  = desc("control_clickroll_hours_pruned_total", "Hourly click rollup rows deleted past --click-hours-retention.")
)

type collector struct {
	c *Control
	s Sources
}

func (x *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dCurrent, dStandby, dRunway, dRate, dLoads, dFailures, dWaits, dOpen, dSealed,
		dWasted, dSwept, dPending, dFenced, dExhausted, dCapacity, dDaysLeft, dCreateRate, dKeysPurged, dCodeSkips, dSharedTx, dCoalesced,
		dPublished, dGapWaits, dRelaySkip, dRelayPurged, dRelayVer, dRelayAt, dRelayActive, dAuthAnswers, dQuestions, dFrontiers, dReplica, dWitnessSkip,
		dRollClicks, dRollLost, dRollPos, dRollPruned} {
		ch <- d
	}
}

func (x *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	if a := x.s.Alloc; a != nil {
		swept := uint64(0)
		for _, ns := range x.s.Namespaces {
			s, err := a.Stats(ns)
			if err != nil {
				continue
			}
			swept = s.SweptSegments
			gauge(dCurrent, float64(s.CurrentRemaining), ns)
			gauge(dStandby, float64(s.StandbyRemaining), ns)
			gauge(dRunway, s.SecondsLeft, ns)
			gauge(dRate, s.Rate, ns)
			counter(dLoads, s.Loads, ns)
			for _, class := range idalloc.Classes() {
				counter(dFailures, s.FailuresByClass[class], ns, class)
			}
			counter(dWaits, s.Waits, ns)
			gauge(dOpen, float64(s.OpenSegments), ns)
			counter(dSealed, s.Sealed, ns)
			counter(dWasted, s.Discarded, ns, "discarded")
			counter(dWasted, s.Uncommitted, ns, "uncommitted")
			counter(dWasted, s.StrayDone, ns, "stray_done")
			counter(dWitnessSkip, s.WitnessSkipped, ns)
			gauge(dPending, b2f(s.PendingRequest), ns)
			gauge(dFenced, b2f(s.Fenced), ns)
			gauge(dExhausted, b2f(s.Exhausted), ns)
		}
		counter(dSwept, swept)
		x.c.mu.Lock()
		for _, ns := range x.s.Namespaces {
			cp, ok := x.c.capacity[ns]
			if !ok {
				continue
			}
			gauge(dCapacity, float64(cp.Committed), ns, "committed")
			gauge(dCapacity, float64(cp.Wasted), ns, "wasted")
			gauge(dCapacity, float64(cp.Reserved), ns, "reserved")
			gauge(dCapacity, float64(cp.Remaining), ns, "remaining")
			gauge(dCapacity, float64(cp.Total), ns, "total")
			days := cp.DaysLeft
			if cp.Rate <= 0 {
				days = math.Inf(1)
			}
			gauge(dDaysLeft, days, ns)
			gauge(dCreateRate, cp.Rate, ns)
		}
		x.c.mu.Unlock()
	}
	if l := x.s.Links; l != nil {
		st := l.Stats()
		counter(dCodeSkips, st.WastedIDs, "taken")
		counter(dCodeSkips, st.ReservedSkips, "reserved")
		counter(dSharedTx, st.SharedTx)
		counter(dCoalesced, st.Coalesced)
	}
	if k := x.s.KeyPurge; k != nil {
		counter(dKeysPurged, k.Purged())
	}
	if r := x.s.Relay; r != nil {
		st := r.Stats()
		counter(dPublished, st.Published)
		counter(dGapWaits, st.GapWaits)
		counter(dRelaySkip, st.Skipped)
		counter(dRelayPurged, st.Purged)
		gauge(dRelayVer, float64(st.Version))
		at := 0.0
		if !st.LastPublish.IsZero() {
			at = float64(st.LastPublish.UnixNano()) / 1e9
		}
		gauge(dRelayAt, at)
		gauge(dRelayActive, b2f(st.Active))
	}
	if r := x.s.Replica; r != nil {
		counter(dReplica, r.FromReplica.Load(), "replica")
		counter(dReplica, r.FromPrimary.Load(), "primary")
		counter(dReplica, r.Fallbacks.Load(), "fallback_found")
		counter(dReplica, r.ReplicaFailed.Load(), "replica_failed")
	}
	if r := x.s.Responder; r != nil {
		counter(dAuthAnswers, r.Answered.Load(), "found")
		counter(dAuthAnswers, r.NotFound.Load(), "not_found")
		counter(dAuthAnswers, r.Failed.Load(), "failed")
		counter(dAuthAnswers, r.Invalid.Load(), "invalid")
		counter(dQuestions, r.Questions.Load())
		counter(dFrontiers, r.FrontierReads.Load())
	}
	if r := x.s.Roller; r != nil {
		st := r.Stats()
		counter(dRollClicks, st.Clicks)
		counter(dRollLost, st.Lost)
		gauge(dRollPos, float64(st.Position))
		counter(dRollPruned, st.Pruned)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
