package links

import (
	"errors"
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
	for _, code := range []string{"API", "Admin", "LIVEZ"} {
		if err := svc.validateCustomCode(code); !errors.Is(err, link.ErrInvalidInput) {
			t.Errorf("custom code %q: %v; want reserved", code, err)
		}
	}
}
