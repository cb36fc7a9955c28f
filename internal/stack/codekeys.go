package stack

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The keys WriteCodeKeys writes: CodeKeyName for control's DomainKey, and
// CodeKeyNext for tests that rotate a domain's key.
const (
	CodeKeyName = "test"
	CodeKeyNext = "test-next"
)

// WriteCodeKeys writes a code key file (shared/ff1 LoadKeys) with two fresh
// random keys, CodeKeyName and CodeKeyNext, into dir, unless one is there already, and
// returns its path: control and every edge of a stack read the same file.
func WriteCodeKeys(dir string) (string, error) {
	path := filepath.Join(dir, "code-keys")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	file := "# FF1 code keys (docs/codes.md); keep secret\n"
	for _, name := range []string{CodeKeyName, CodeKeyNext} {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return "", err
		}
		file += fmt.Sprintf("%s %s\n", name, base64.StdEncoding.EncodeToString(key))
	}
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// CodeKeys is WriteCodeKeys into a folder of the test's own.
func CodeKeys(t testing.TB) string {
	t.Helper()
	path, err := WriteCodeKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return path
}
