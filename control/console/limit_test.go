package console

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

func TestFailuresUnderConcurrencyStayBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := newFailures(1, 5, 64, func() time.Time { return now })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				a := netip.AddrFrom4([4]byte{10, byte(g), byte(i >> 8), byte(i)})
				f.fail(a)
				f.blocked(a)
			}
		})
	}
	wg.Wait()
	if n := len(f.clients); n > 64 {
		t.Errorf("%d clients tracked; want at most 64", n)
	}
	hot := netip.MustParseAddr("10.9.9.9")
	for range 5 {
		f.fail(hot)
	}
	if _, blocked := f.blocked(hot); !blocked {
		t.Error("a client past its burst is not blocked")
	}
}

func TestClientOfGroupsIPv6By64(t *testing.T) {
	for _, c := range []struct{ remote, want string }{
		{"192.0.2.1:443", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:443", "192.0.2.1"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2:bbbb::9]:443", "2001:db8:1:2::"},
		{"@", "invalid IP"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if got := clientOf(r).String(); got != c.want {
			t.Errorf("clientOf(%s) = %s; want %s", c.remote, got, c.want)
		}
	}
}

func TestQRAuthTakesOnlyConsoleKeys(t *testing.T) {
	for key, want := range map[string]int64{qrKeyPrefix + "42": 42, qrKeyPrefix + "0": 0, qrKeyPrefix + "-1": 0, qrKeyPrefix: 0,
		"elk_" + qrKeyPrefix + "7": 0, "42": 0, qrKeyPrefix + "1x": 0} {
		got, _, _, err := QRAuth{}.Authenticate(context.Background(), key)
		if got != want || (want == 0) != errors.Is(err, link.ErrUnauthorized) {
			t.Errorf("%s: %d, %v; want %d", fmt.Sprintf("%q", key), got, err, want)
		}
	}
}
