package natstest

import (
	"testing"
	"time"
)

// Picked ports are distinct and lie below the ephemeral range, where no
// outgoing connection's source port can take them while a server is down.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	if lo <= 2048 {
		t.Skipf("ephemeral range starts at %d: no room below it, FreePorts uses port 0", lo)
	}
	ports, err := FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range ports {
		if port < 1024 || port >= lo {
			t.Errorf("FreePorts gave %d, want it in [1024, %d)", port, lo)
		}
		if seen[port] {
			t.Errorf("FreePorts gave %d twice: %v", port, ports)
		}
		seen[port] = true
	}
}

// A restarted server comes back on its port, and a client reconnects.
func TestRestartKeepsPort(t *testing.T) {
	s := Start(t)
	nc, _ := s.Connect(t)
	url := s.ClientURL()
	s.Restart(t)
	if got := s.ClientURL(); got != url {
		t.Fatalf("restarted on %s, want %s", got, url)
	}
	// A flush is a round trip, answered once the client is back; one sent
	// before the client saw the restart is cancelled: ask again.
	deadline := time.Now().Add(readyWithin)
	for {
		err := nc.FlushTimeout(time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client did not reconnect within %v of the restart: %v", readyWithin, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
