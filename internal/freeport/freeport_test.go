package freeport

import "testing"

// Picked ports are distinct and lie below the ephemeral range, where no
// outgoing connection's source port can take them while a server is down.
func TestPortsBelowEphemeralRange(t *testing.T) {
	lo := EphemeralLow()
	if lo <= 2048 {
		t.Skipf("ephemeral range starts at %d: no room below it, Ports uses port 0", lo)
	}
	for range 10 {
		ports, err := Ports(6)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, port := range ports {
			if port < 1024 || port >= lo {
				t.Errorf("Ports gave %d, want it in [1024, %d)", port, lo)
			}
			if seen[port] {
				t.Errorf("Ports gave %d twice: %v", port, ports)
			}
			seen[port] = true
		}
	}
}
