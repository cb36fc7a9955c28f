// Package idalloc hands out link IDs from segments leased from an authority,
// Leaf-segment style, so that no ID is ever handed out twice.
//
// # Model
//
// Each namespace owns a disjoint, pre-partitioned ID range [Start, End). The
// authority (a Store: Postgres in production) keeps one counter row per
// namespace holding the next unallocated ID and leases [start, end) segments
// from it, one transaction per segment, recorded in an audit by a request id.
// A leased segment becomes an immutable range object in memory: its bounds
// never change and its cursor only grows, so a goroutine holding an old range
// can only ever take that range's own IDs. Ranges are never resumed after a
// restart and never returned: unused IDs are waste, counted in the audit.
//
// Namespaces are configured at start (Config.Namespaces) or learned on the
// first Next that names them (Config.Lookup reads them from the authority):
// each domain of links has its own, made with the domain, possibly by another
// instance after this one started. A namespace's range lies in one domain's
// IDs (shared/link IDRange), and a learned one gets every rule below.
//
// Each namespace keeps a double buffer (current and standby) filled by exactly
// one loader goroutine, which prefetches the standby when the current range
// has fewer than PrefetchAhead seconds left at the observed rate (or is half
// used, whichever comes first). On the fast path Next is one atomic add on the
// current range's cursor and allocates nothing.
//
// # The create-path contract (sealing)
//
// A segment is sealed (an outbox event tells edges that no create can land in
// it any more, so a code from it that they do not know is certainly unknown)
// only when every ID handed out from it has finished its create transaction.
// The allocator learns that from Done:
//
//	id, err := alloc.Next(ctx, "default")
//	if err != nil { ... }            // errors.Is(err, idalloc.ErrUnavailable): retry later
//	committed := false
//	defer func() { alloc.Done(id, committed) }()
//	... insert the link with id; committed = (the transaction committed) ...
//
// Call Done exactly once per ID returned by Next, after the transaction that
// uses it has committed or rolled back and no further attempt will use the ID
// (retry with a new ID, not the same one, or call Done after the last retry).
// An ID whose Done never comes keeps its segment open forever, which is safe
// (edges ask the authority about open segments) but costs edge lookups. A
// second Done for one ID could seal a segment early and is a bug.
//
// A crashed instance cannot call Done. Its segments stay open until another
// instance's sweeper (Config.AbandonAfter) seals them, counting as used the
// links that really exist in the interval. That is sound as long as no create
// transaction lives longer than AbandonAfter minus the heartbeat interval:
// the create path must bound its transactions (context deadline, and
// statement/idle-in-transaction timeouts on the server) well below it. An
// instance that cannot heartbeat for AbandonAfter/2 fences itself: it retires
// its ranges and hands out no more IDs from them.
//
// # Failover (the witness)
//
// The authority fences itself when its counter is below its own audit, and
// a running allocator refuses a segment below one it already had. Neither
// sees an asynchronous replica promoted before the last leases reached it
// (counter and audit lost together) from a freshly started instance. A
// Witness (Config.Witness; kvwitness keeps it in NATS JetStream) closes that
// gap: each confirmed segment's end is recorded there before any of its IDs
// is handed out, and each lease passes it as LeaseRequest.Floor, which the
// store refuses (ErrFenced) when its counter is below. Segments an instance
// already holds stay usable after such a failover: they were confirmed and
// witnessed, so no other instance will be given them again.
package idalloc
