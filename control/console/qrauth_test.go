package console

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

func TestQRAuthTakesOnlyConsoleKeys(t *testing.T) {
	for key, want := range map[string]int64{qrKeyPrefix + "42": 42, qrKeyPrefix + "0": 0, qrKeyPrefix + "-1": 0, qrKeyPrefix: 0,
		"elk_" + qrKeyPrefix + "7": 0, "42": 0, qrKeyPrefix + "1x": 0} {
		got, _, _, err := QRAuth{}.Authenticate(context.Background(), key)
		if got != want || (want == 0) != errors.Is(err, link.ErrUnauthorized) {
			t.Errorf("%s: %d, %v; want %d", fmt.Sprintf("%q", key), got, err, want)
		}
	}
}
