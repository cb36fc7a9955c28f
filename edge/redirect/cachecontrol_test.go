package redirect

import (
	"os"
	"strings"
	"testing"
)

// TestCacheControlAsDocumented: the header every edge answer carries is the
// one docs/edge.md promises, word for word. no-store alone forbids every
// cache from keeping the answer, so nothing else is sent.
func TestCacheControlAsDocumented(t *testing.T) {
	const want = "private, no-store"
	if got := string(cacheControl); got != want {
		t.Errorf("edge answers carry Cache-Control %q; want %q", got, want)
	}
	doc, err := os.ReadFile("../../docs/edge.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), "carries `Cache-Control: "+string(cacheControl)+"`") {
		t.Errorf("docs/edge.md does not say every answer carries `Cache-Control: %s`", cacheControl)
	}
}
