package outage

import (
	"os"
	"testing"

	"github.com/edgelink/edgelink/internal/stack"
)

// TestMain removes the control binary the tests build (stack.ControlBinary)
// after them.
func TestMain(m *testing.M) { stack.Main(m) }

// gate skips a minutes-long scenario unless the launch-gate run asked for it.
func gate(t *testing.T) {
	t.Helper()
	if os.Getenv("EDGELINK_GATE") == "" {
		t.Skip("minutes long: runs with EDGELINK_GATE=1, as `go tool task gate` does")
	}
}
