package controlserver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/shared/link"
)

// TestAllocErrorKeepsExhaustion: the create path sees every allocation
// failure as unavailable, and an exhausted namespace also as exhausted, so
// the API can answer 507 without Retry-After for it alone.
func TestAllocErrorKeepsExhaustion(t *testing.T) {
	for _, tc := range []struct {
		cause     error
		exhausted bool
	}{
		{fmt.Errorf("lease segment: %w", idalloc.ErrExhausted), true},
		{fmt.Errorf("%w: namespace default: %w", idalloc.ErrUnavailable, idalloc.ErrLockTimeout), false},
		{idalloc.ErrFenced, false},
	} {
		err := allocError(tc.cause)
		if !errors.Is(err, link.ErrUnavailable) || errors.Is(err, link.ErrExhausted) != tc.exhausted || !errors.Is(err, tc.cause) {
			t.Errorf("allocError(%v) = %v: unavailable %v, exhausted %v, keeps its cause %v; want true, %v, true",
				tc.cause, err, errors.Is(err, link.ErrUnavailable), errors.Is(err, link.ErrExhausted), errors.Is(err, tc.cause), tc.exhausted)
		}
	}
}
