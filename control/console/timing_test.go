package console_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/edgelink/edgelink/control/console"
)

var serverTiming = regexp.MustCompile(`^console;dur=(\d+\.\d{3})$`)

// TestServerTiming: every answer of the console, a page, a redirect, a
// refusal or a static file, says in Server-Timing how long the server
// took, in milliseconds.
func TestServerTiming(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.2.4")
	b.signIn(t, e.key)
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/console/links", http.StatusOK},
		{"/console/links?sort=nope", http.StatusBadRequest},
		{"/console/links/no-such-1", http.StatusNotFound},
		{"/console/", http.StatusSeeOther},
		{"/console/static/console.css", http.StatusOK},
	} {
		w := b.do("GET", c.path, nil)
		m := serverTiming.FindStringSubmatch(w.Header().Get("Server-Timing"))
		if w.Code != c.status || m == nil {
			t.Errorf("GET %s: %d, Server-Timing %q; want %d and console;dur=<ms>", c.path, w.Code, w.Header().Get("Server-Timing"), c.status)
			continue
		}
		if ms, err := strconv.ParseFloat(m[1], 64); err != nil || ms < 0 {
			t.Errorf("GET %s: duration %q", c.path, m[1])
		}
	}
}
