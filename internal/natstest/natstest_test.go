package natstest

import (
	"testing"
)

// A restarted server comes back on its port, and a client reconnects.
func TestRestartKeepsPort(t *testing.T) {
	s := Start(t)
	nc, _ := s.Connect(t)
	url := s.ClientURL()
	s.Restart(t)
	if got := s.ClientURL(); got != url {
		t.Fatalf("restarted on %s, want %s", got, url)
	}
	WaitConnected(t, nc, readyWithin)
}
