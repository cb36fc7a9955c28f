package clicks

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Visitor salts: one random secret per UTC day, shared by every edge so a
// visitor hashes the same on all of them that day, and deleted soon after
// the day ends so that no one can recompute a hash from an address later.
// Control writes them (create-if-absent: a day's salt is never replaced)
// for today and tomorrow, so an edge cut off from NATS at midnight already
// holds the new day's; edges watch the bucket.
const (
	// SaltBucket is the JetStream key-value bucket holding the salts, one
	// key per day (SaltKey).
	SaltBucket = "VISITOR_SALTS"
	// SaltLen is a salt's length in bytes: 256 bits.
	SaltLen = 32
	// SaltGrace is how long after its day ends a salt is kept: clicks
	// recorded just before midnight are published a moment later, and an
	// edge's clock may be a little behind. Past it, a click of that day
	// gets no visitor hash.
	SaltGrace = 24 * time.Hour
	// SaltAhead is how far ahead control writes salts: tomorrow's exists
	// from the start of today.
	SaltAhead = 24 * time.Hour
	// saltMaxAge bounds a salt's life in the bucket even if no control
	// deletes it: written at the earliest SaltAhead before its day,
	// needed until SaltGrace after it.
	saltMaxAge = SaltAhead + 24*time.Hour + SaltGrace + 24*time.Hour
)

// SaltKey is the key of day's salt: the UTC date, "2006-01-02".
func SaltKey(day time.Time) string { return day.UTC().Format(time.DateOnly) }

// SaltDay reads a key SaltKey wrote back into its day (UTC midnight).
func SaltDay(key string) (time.Time, error) {
	d, err := time.Parse(time.DateOnly, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("visitor salt key %q: not a date: %w", key, err)
	}
	return d, nil
}

// SaltWanted reports whether a salt for day should exist at now: from
// SaltAhead before the day begins until SaltGrace after it ends.
func SaltWanted(day, now time.Time) bool {
	day = day.UTC().Truncate(24 * time.Hour)
	return !now.Before(day.Add(-SaltAhead)) && now.Before(day.Add(24*time.Hour+SaltGrace))
}

// SaltStream is the stream behind SaltBucket, as JetStream names a key-value
// bucket's.
const SaltStream = "KV_" + SaltBucket

// SaltStreamConfig is the bucket's stream as whoever creates it first,
// control or an edge, creates it (then it is opened as a key-value bucket,
// jetstream.KeyValue). It is what JetStream makes of a key-value bucket of
// one revision per key, file storage and MaxAge, except that it allows
// deleting a message: a key-value bucket's stream forbids it, and a purge
// alone leaves the purged salt's bytes in the store's files; deleting the
// message securely first overwrites them. One revision per key: a salt is
// written once and then deleted, never changed. File storage, so a NATS
// restart keeps the day's salt (a new one would split the day's uniques in
// two). MaxAge is a backstop: a salt disappears even if every control is
// down when it is due to be deleted.
func SaltStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              SaltStream,
		Description:       "per-day salts of click visitor hashes (key-value bucket " + SaltBucket + "); each deleted after its day",
		Subjects:          []string{"$KV." + SaltBucket + ".>"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          -1,
		MaxMsgs:           -1,
		MaxMsgSize:        -1,
		MaxConsumers:      -1,
		MaxAge:            saltMaxAge,
		Storage:           jetstream.FileStorage,
		Replicas:          1,
		AllowRollup:       true,
		AllowDirect:       true,
		DenyDelete:        false,
		Duplicates:        2 * time.Minute,
		Discard:           jetstream.DiscardNew,
	}
}
