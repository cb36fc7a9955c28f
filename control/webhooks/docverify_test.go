package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Verify is docs/webhooks.md's verification code, as a receiver would copy
// it; TestDocsVerifyIsThisCode keeps the two the same, and the delivery
// tests check every webhook with it.
// Verify checks a webhook from edgelink. secret is "whsec_…"; body is the
// raw request body, read before any JSON decoding.
func Verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("bad secret: %w", err)
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("bad webhook-timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("webhook-timestamp too far from now")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(h.Get("webhook-signature")) {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(sig); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

func TestDocsVerifyIsThisCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("docverify_test.go")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(src), "// Verify checks")
	end := strings.Index(string(src), "\nfunc TestDocsVerifyIsThisCode")
	if start < 0 || end < 0 || !strings.Contains(string(doc), "```go\n"+string(src[start:end])+"```") {
		t.Error("docs/webhooks.md's Verify is not the code in docverify_test.go: copy one to the other")
	}
}
