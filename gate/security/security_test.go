// Package security holds the launch gate's security checks, end to end:
// control and an edge run in this process on a real PostgreSQL and NATS
// JetStream, and the tests attack them over TCP as a client would: hostile
// targets and request paths (open redirects), every documented endpoint
// with another tenant's key and with a revoked one, slow and oversized
// requests, and a search of everything logged at info level for codes,
// URLs, idempotency keys and API keys.
package security

import "testing"

// TestSecurity runs every check against one stack (starting one takes
// longer than most checks); each check works in tenants of its own, one
// after the other.
func TestSecurity(t *testing.T) {
	s := startStack(t, "evil.example", "blocked-canary.example")
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"NoOpenRedirectThroughHostileTargets", testNoOpenRedirectThroughHostileTargets},
		{"NoOpenRedirectThroughCraftedPaths", testNoOpenRedirectThroughCraftedPaths},
		{"TenantIsolationOnEveryEndpoint", testTenantIsolationOnEveryEndpoint},
		{"RevokedKeyFailsOnEveryEndpoint", testRevokedKeyFailsOnEveryEndpoint},
		{"OversizedRequestsOnControl", testOversizedRequestsOnControl},
		{"OversizedRequestsOnTheEdge", testOversizedRequestsOnTheEdge},
		{"SlowClientsAreTimedOut", testSlowClientsAreTimedOut},
		// Last: it searches what every check before it made the stack log.
		{"InfoLogsCarryNoLinkDataOrKeys", testInfoLogsCarryNoLinkDataOrKeys},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
	}
}
