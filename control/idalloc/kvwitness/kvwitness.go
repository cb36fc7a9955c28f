// Package kvwitness keeps the allocator's high-water witness (see
// idalloc.Witness) in a NATS JetStream key-value bucket: one key per
// namespace holding the highest confirmed segment end in decimal, only ever
// raised, by compare-and-set on the key's revision.
//
// It lives outside PostgreSQL on purpose: an asynchronous replica promoted
// before the last leases reached it has lost the counter advance and its
// audit row together, so nothing inside the database can tell; the witness
// still can.
package kvwitness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/idalloc"
)

// Bucket is the default bucket name.
const Bucket = "ALLOC_WITNESS"

// maxCAS bounds compare-and-set retries under contention; each retry means
// another instance moved the key, so a handful is plenty.
const maxCAS = 32

// Witness is an idalloc.Witness on a JetStream KV bucket. It is safe for
// concurrent use.
type Witness struct {
	js       jetstream.JetStream
	bucket   string
	replicas int

	mu sync.Mutex
	kv jetstream.KeyValue
}

var _ idalloc.Witness = (*Witness)(nil)

// New returns the witness in bucket (empty takes Bucket). The bucket is
// opened, or created (file storage, replicas copies: give it 3 on a 3-node
// cluster so losing a node loses no high-water), on first use and again
// after a failure, so a NATS outage at start is a failed lease, not a
// failed start.
func New(js jetstream.JetStream, bucket string, replicas int) *Witness {
	if bucket == "" {
		bucket = Bucket
	}
	return &Witness{js: js, bucket: bucket, replicas: max(replicas, 1)}
}

func (w *Witness) open(ctx context.Context) (jetstream.KeyValue, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kv != nil {
		return w.kv, nil
	}
	kv, err := w.js.KeyValue(ctx, w.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = w.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      w.bucket,
			Description: "edgelink allocation high-water per namespace: a failover that lost confirmed leases is refused below it",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    w.replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = w.js.KeyValue(ctx, w.bucket) // another instance made it first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("allocation witness: bucket %s: %w", w.bucket, err)
	}
	w.kv = kv
	return kv, nil
}

// HighWater implements idalloc.Witness. The value read is confirmed current
// by a compare-and-set of the same value on its revision, so a KV read
// served by a lagging replica of the bucket cannot hand a lease a stale,
// lower floor.
func (w *Witness) HighWater(ctx context.Context, namespace string) (uint64, error) {
	kv, err := w.open(ctx)
	if err != nil {
		return 0, err
	}
	for range maxCAS {
		v, rev, err := w.get(ctx, kv, namespace)
		if err != nil || rev == 0 {
			return v, err
		}
		if _, err = kv.Update(ctx, namespace, encode(v), rev); err == nil {
			return v, nil
		}
		if !conflict(err) {
			return 0, fmt.Errorf("allocation witness: confirm %s: %w", namespace, err)
		}
	}
	return 0, fmt.Errorf("allocation witness: read %s: still changing after %d tries", namespace, maxCAS)
}

// Advance implements idalloc.Witness.
func (w *Witness) Advance(ctx context.Context, namespace string, end uint64) error {
	kv, err := w.open(ctx)
	if err != nil {
		return err
	}
	for range maxCAS {
		v, rev, err := w.get(ctx, kv, namespace)
		if err != nil {
			return err
		}
		if v >= end {
			return nil
		}
		if rev == 0 {
			_, err = kv.Create(ctx, namespace, encode(end))
		} else {
			_, err = kv.Update(ctx, namespace, encode(end), rev)
		}
		if err == nil {
			return nil
		}
		if !conflict(err) {
			return fmt.Errorf("allocation witness: advance %s to %d: %w", namespace, end, err)
		}
	}
	return fmt.Errorf("allocation witness: advance %s to %d: still contended after %d tries", namespace, end, maxCAS)
}

// get returns the key's value and revision; revision 0 when there is none.
func (w *Witness) get(ctx context.Context, kv jetstream.KeyValue, namespace string) (uint64, uint64, error) {
	e, err := kv.Get(ctx, namespace)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("allocation witness: read %s: %w", namespace, err)
	}
	v, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		// Fail closed: a witness that cannot be read proves nothing.
		return 0, 0, fmt.Errorf("allocation witness: %s holds %q, not a high-water: %w", namespace, e.Value(), err)
	}
	return v, e.Revision(), nil
}

func encode(v uint64) []byte { return strconv.AppendUint(nil, v, 10) }

func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}
