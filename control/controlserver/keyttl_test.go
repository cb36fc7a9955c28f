package controlserver

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunRefusesKeyTTL: Run refuses an idempotency key time to live over
// 30 days (or negative) before it opens anything.
func TestRunRefusesKeyTTL(t *testing.T) {
	for _, ttl := range []time.Duration{31 * 24 * time.Hour, -time.Minute} {
		err := Run(context.Background(), Config{DatabaseURL: "postgres://127.0.0.1:1/none", IdempotencyTTL: ttl})
		if err == nil || !strings.Contains(err.Error(), "30 days") {
			t.Errorf("Run with IdempotencyTTL %v: %v; want it refused", ttl, err)
		}
	}
}
