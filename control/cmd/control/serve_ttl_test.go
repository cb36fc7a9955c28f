package main

import (
	"strings"
	"testing"
)

// TestServeRefusesIdempotencyTTL: a key time to live that is not positive
// or is over 30 days stops serve at start (exit code 2), from the flag or
// the environment, before anything is opened.
func TestServeRefusesIdempotencyTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"31 days", nil, []string{"--idempotency-ttl", "744h"}},
		{"zero", nil, []string{"--idempotency-ttl", "0s"}},
		{"negative", nil, []string{"--idempotency-ttl=-1h"}},
		{"environment", map[string]string{"EDGELINK_IDEMPOTENCY_TTL": "721h"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--database-url", "postgres://127.0.0.1:1/none", "serve"}, tc.args...)
			_, _, err := runCLIEnv(t, tc.env, args...)
			if err == nil || !strings.Contains(err.Error(), "--idempotency-ttl") || !strings.Contains(err.Error(), "30 days") || exitCode(err) != exitUsage {
				t.Fatalf("serve %v (env %v): %v; want --idempotency-ttl refused as usage, naming the 30-day bound", tc.args, tc.env, err)
			}
		})
	}
}
