package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// SecretPrefix starts every signing secret as shown to a tenant, as the
// Standard Webhooks specification writes them: whsec_ and the base64 of
// the key's bytes.
const SecretPrefix = "whsec_"

// SecretLen is a signing key's length in bytes.
const SecretLen = 32

// NewSecret returns a random signing key.
func NewSecret() ([]byte, error) {
	b := make([]byte, SecretLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("new webhook secret: %w", err)
	}
	return b, nil
}

// EncodeSecret is key as a tenant sees it once: whsec_ and base64.
func EncodeSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// DecodeSecret reads a secret EncodeSecret wrote.
func DecodeSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("webhook secret does not start with %s", SecretPrefix)
	}
	return base64.StdEncoding.DecodeString(rest)
}

// Sign is the base64 HMAC-SHA256, under key, of "id.timestamp.body": what
// the Standard Webhooks specification signs, so a receiver that checks
// the timestamp cannot be replayed an old body under a new time.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignatureHeader is the webhook-signature header for an attempt: a
// space-separated "v1,<signature>" per key, the current key's first.
func SignatureHeader(keys [][]byte, id string, timestamp int64, body []byte) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(Sign(k, id, timestamp, body))
	}
	return b.String()
}
