package links

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

func TestReserved(t *testing.T) {
	r := Reserved([]string{"api", "/livez", "readyz/"}, "Acme")
	for _, code := range []string{"api", "livez", "readyz", "metrics", "robots.txt", "favicon.ico", "login", "well-known", "acme"} {
		if !r[code] {
			t.Errorf("%q is not reserved", code)
		}
	}
	for _, code := range []string{"", "#", "about:", "spring-sale"} {
		if r[code] {
			t.Errorf("%q is reserved", code)
		}
	}
	svc := New(nil, nil, Config{Reserved: []string{"api"}})
	// Reserved words are refused as such, before the rules of length and
	// characters they may break too.
	for _, code := range []string{"API", "Admin", "LIVEZ", "api", "-", "robots.txt", "Favicon.ico"} {
		err := svc.validateCustomCode(code)
		if !errors.Is(err, link.ErrInvalidInput) || !strings.Contains(err.Error(), fmt.Sprintf("code %q is reserved", code)) {
			t.Errorf("custom code %q: %v; want it refused as reserved, by name", code, err)
		}
	}
}
