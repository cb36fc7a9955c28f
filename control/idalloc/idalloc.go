package idalloc

import (
	"context"
	"errors"
	"time"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// DefaultStep is the segment length when a namespace does not set one: at
// 5,000 IDs/s a segment lasts 20 s, and a million IDs cost 10 transactions.
const DefaultStep = 100_000

// Errors returned by the allocator. Store implementations wrap the failure
// classes (ErrLockTimeout, ErrCommitUnknown, ErrStoreUnavailable, ErrFenced,
// ErrExhausted) so the loader can classify and back off.
var (
	// ErrUnavailable is retryable: no ID could be handed out before the
	// caller's deadline (the authority is slow or failing, see the wrapped
	// cause). The caller may retry or answer 503.
	ErrUnavailable = errors.New("idalloc: no id available in time")
	// ErrExhausted means the namespace's range is used up: its last ID has
	// been handed out. Not retryable.
	ErrExhausted = errors.New("idalloc: namespace id range exhausted")
	// ErrFenced means the authority cannot prove its high-water mark (its
	// counter is below an audited interval, its epoch went back, or it
	// returned a segment below one this process already had). Allocation
	// stays refused until an operator repairs the authority.
	ErrFenced = errors.New("idalloc: allocation fenced: authority high-water mark not provable")
	// ErrClosed is returned by Next once Close has started.
	ErrClosed = errors.New("idalloc: allocator closed")
	// ErrUnknownNamespace is returned for a namespace not in the Config.
	ErrUnknownNamespace = errors.New("idalloc: unknown namespace")
	// ErrConfig reports an invalid or overlapping namespace configuration.
	ErrConfig = errors.New("idalloc: invalid configuration")

	// ErrLockTimeout: the counter row lock was not granted in time.
	ErrLockTimeout = errors.New("idalloc: counter row lock wait timed out")
	// ErrCommitUnknown: the connection was lost after COMMIT may have been
	// sent. The loader retries with the same request id, which returns the
	// committed interval if there is one.
	ErrCommitUnknown = errors.New("idalloc: commit outcome unknown")
	// ErrStoreUnavailable: the authority could not be reached or timed out.
	ErrStoreUnavailable = errors.New("idalloc: authority unavailable")
	// ErrUnknownSegment: Seal named a segment the authority has no record
	// of, as after a failover to a replica that never received its lease.
	// Not retryable: the allocator drops the segment unsealed.
	ErrUnknownSegment = errors.New("idalloc: segment unknown to the authority")
	// ErrRejected: the load was not started because every loader slot was
	// busy (Config.MaxConcurrentLoads).
	ErrRejected = errors.New("idalloc: segment load rejected: no free loader slot")
	// ErrCeilingWait: the namespace's frontier ceiling (the highest end a
	// lease may have, which edges are promised for a while) leaves no room
	// yet. The store has raised it; the raise takes effect after a delay,
	// given by a *CeilingWaitError. Retryable: the loader waits that long.
	ErrCeilingWait = errors.New("idalloc: the frontier's ceiling leaves no room yet")
)

// CeilingWaitError says how long until a raised ceiling takes effect. It
// wraps ErrCeilingWait.
type CeilingWaitError struct {
	Namespace string
	Wait      time.Duration
}

func (e *CeilingWaitError) Error() string {
	return "namespace " + e.Namespace + ": the frontier's ceiling was raised and takes effect in " + e.Wait.String()
}

func (e *CeilingWaitError) Unwrap() error { return ErrCeilingWait }

// Retryable reports whether err from Next is worth retrying later.
func Retryable(err error) bool { return errors.Is(err, ErrUnavailable) }

// Namespace is one namespace's pre-partitioned ID range [Start, End).
type Namespace struct {
	Name string
	// The range lies in one domain's IDs (shared/link IDRange): Start is
	// at least the domain's first ID (base62.MinID for the platform's);
	// End is exclusive and at most the domain's end (base62.Space for the
	// platform's), so its last ID is usable.
	Start, End uint64
	// Step is the segment length; zero means DefaultStep.
	Step uint64
}

// Segment is an interval [Start, End) the authority confirmed for one lease.
type Segment struct {
	RequestID string
	Namespace string
	Start     uint64
	End       uint64
	Epoch     int64
	Instance  string
}

// Len is the number of IDs in the segment.
func (s Segment) Len() uint64 { return s.End - s.Start }

// LeaseRequest asks the authority for the next segment of a namespace.
type LeaseRequest struct {
	// RequestID makes the lease idempotent: a store that finds a committed
	// segment under this id returns it instead of allocating another.
	RequestID string
	Namespace string
	Instance  string
	// Floor, when non-zero, is the namespace's high-water according to the
	// Witness: a store whose counter is below it has lost confirmed leases
	// and must refuse (wrapping ErrFenced) without allocating. A committed
	// lease found under RequestID is still returned.
	Floor uint64
	// Ahead is how many IDs this instance expects the namespace to take
	// soon (its observed rate over a horizon well past the ceiling's
	// delay), so the store raises the frontier's ceiling early enough that
	// no lease has to wait for it.
	Ahead uint64
}

// Witness keeps, outside the authority, the highest segment end confirmed
// in each namespace, so that an authority that went back (an asynchronous
// replica promoted before the last leases reached it, which lost the
// counter and the audit together and so cannot see it by itself) is
// detected by every instance, including a freshly started one. The
// allocator reads it before each lease (the store's Floor) and advances it
// with the segment's end before handing out any ID of the segment.
// Implementations must be safe for concurrent use and durable.
type Witness interface {
	// HighWater returns namespace's recorded high-water, 0 when none.
	HighWater(ctx context.Context, namespace string) (uint64, error)
	// Advance raises namespace's high-water to end if it is lower; it never
	// lowers it (compare-and-set), and returns nil when already at or above.
	Advance(ctx context.Context, namespace string, end uint64) error
}

// SealRequest records that no create transaction can use an ID of the
// segment any more.
type SealRequest struct {
	RequestID string
	Instance  string
	// Used is how many IDs of the segment ended in a committed create.
	Used uint64
}

// Store is what the allocator needs from the authority. Implementations must
// be safe for concurrent use.
type Store interface {
	// EnsureNamespace creates the namespace's counter row at ns.Start if it
	// is missing and checks that an existing one has the same bounds. It
	// fails (wrapping ErrConfig) if the range overlaps another namespace's.
	EnsureNamespace(ctx context.Context, ns Namespace) error
	// Lease allocates the next segment in one transaction on the primary,
	// idempotently by req.RequestID. It wraps ErrExhausted when the
	// namespace has no ID left and ErrFenced when the counter cannot be
	// trusted. A successful lease also records the instance's heartbeat.
	Lease(ctx context.Context, req LeaseRequest) (Segment, error)
	// Seal marks the segment sealed and emits its sealed event; sealing a
	// sealed segment is a no-op; a segment it has no record of wraps
	// ErrUnknownSegment.
	Seal(ctx context.Context, req SealRequest) error
	// Heartbeat records that instance is alive and, when abandonAfter > 0,
	// seals the open segments of instances silent for longer than that. It
	// returns how many segments it sealed.
	Heartbeat(ctx context.Context, instance string, abandonAfter time.Duration) (int, error)
}

// CapacityReader is implemented by stores that can report the namespace's
// capacity as the authority sees it.
type CapacityReader interface {
	Capacity(ctx context.Context, namespace string) (Capacity, error)
}

// Capacity is a namespace's space accounting. Allocated = Committed + Wasted
// + Reserved, in IDs.
type Capacity struct {
	Namespace string
	// Total is the size of the namespace's range.
	Total uint64
	// Allocated is every ID in a confirmed segment.
	Allocated uint64
	// Committed is IDs of sealed segments that ended in a committed create.
	Committed uint64
	// Wasted is IDs of sealed segments that never will: discarded at
	// shutdown, lost with a crashed instance, rolled-back creates.
	Wasted uint64
	// Reserved is IDs of open segments (in use, or held by an instance
	// that has not been swept yet).
	Reserved uint64
	// Remaining is IDs never allocated.
	Remaining uint64
	// Last5m and LastHour are the committed creates of the last five
	// minutes and of the last hour, every instance's, as the authority
	// counts them.
	Last5m, LastHour CreateCount
	// Rate is the recent rate of committed creates in IDs per second: the
	// busier of Last5m and LastHour, so a quiet five minutes does not hide
	// a busy hour and a burst shows within the minute. Segment leases are
	// not creates: they reserve a segment of IDs at a time, ahead of use.
	Rate float64
	// DaysLeft is Remaining at Rate; +Inf when Rate is zero.
	DaysLeft float64
}

// CreateCount is the committed creates of a window that ends when it was
// read and starts at a whole minute: a window of "the last five minutes"
// is five minutes plus the part of the current minute gone by.
type CreateCount struct {
	Creates uint64
	Window  time.Duration
}

// PerSecond is Creates over Window; zero for an empty window.
func (c CreateCount) PerSecond() float64 {
	if c.Window <= 0 {
		return 0
	}
	return float64(c.Creates) / c.Window.Seconds()
}

func validateNamespaces(nss []Namespace) error {
	if len(nss) == 0 {
		return errors.Join(ErrConfig, errors.New("no namespace configured"))
	}
	for i, a := range nss {
		switch {
		case a.Name == "":
			return errors.Join(ErrConfig, errors.New("namespace without a name"))
		case a.Start < base62.MinID || a.Start >= a.End:
			return errors.Join(ErrConfig, rangeError(a, "range must satisfy 1 <= start < end"))
		}
		if d, _ := link.SplitID(a.Start); d > link.MaxDomainID {
			return errors.Join(ErrConfig, rangeError(a, "range starts past the last domain's IDs"))
		} else if lo, hi := link.IDRange(d); a.Start < lo || a.End > hi {
			return errors.Join(ErrConfig, rangeError(a, "range must lie in one domain's IDs: d·62^6 + 1 <= start < end <= (d+1)·62^6"))
		}
		for _, b := range nss[:i] {
			if a.Name == b.Name {
				return errors.Join(ErrConfig, rangeError(a, "namespace configured twice"))
			}
			if a.Start < b.End && b.Start < a.End {
				return errors.Join(ErrConfig, rangeError(a, "overlaps namespace "+b.Name))
			}
		}
	}
	return nil
}

type nsError struct {
	ns  Namespace
	msg string
}

func rangeError(ns Namespace, msg string) error { return &nsError{ns, msg} }

func (e *nsError) Error() string {
	return "namespace " + e.ns.Name + " [" + utoa(e.ns.Start) + ", " + utoa(e.ns.End) + "): " + e.msg
}

func utoa(u uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			return string(b[i:])
		}
	}
}

// classes are the failure classes of a segment load, as Stats and OnLoad
// name them.
var classes = [...]string{"lock_timeout", "unavailable", "commit_unknown", "rejected", "fenced", "exhausted", "ceiling_wait", "other"}

// Classes lists the failure classes of a segment load (Stats.LastFailure,
// Stats.FailuresByClass, Config.OnLoad), for metrics to pre-create.
func Classes() []string { return classes[:] }

// Class is the failure class of a load error, empty for nil.
func Class(err error) string { return classify(err) }

func classIndex(class string) int {
	for i, c := range classes {
		if c == class {
			return i
		}
	}
	return len(classes) - 1
}

func classify(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrFenced):
		return "fenced"
	case errors.Is(err, ErrExhausted):
		return "exhausted"
	case errors.Is(err, ErrLockTimeout):
		return "lock_timeout"
	case errors.Is(err, ErrCommitUnknown):
		return "commit_unknown"
	case errors.Is(err, ErrRejected):
		return "rejected"
	case errors.Is(err, ErrCeilingWait):
		return "ceiling_wait"
	case errors.Is(err, ErrStoreUnavailable), errors.Is(err, context.DeadlineExceeded):
		return "unavailable"
	default:
		return "other"
	}
}
