package stack

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// CodeKeyName is the key WriteCodeKeys writes, for control's DomainKey.
const CodeKeyName = "test"

// WriteCodeKeys writes a code key file (shared/ff1 LoadKeys) with one fresh
// random key named CodeKeyName into dir, unless one is there already, and
// returns its path: control and every edge of a stack read the same file.
func WriteCodeKeys(dir string) (string, error) {
	path := filepath.Join(dir, "code-keys")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	line := fmt.Sprintf("# FF1 code keys (docs/codes.md); keep secret\n%s %s\n", CodeKeyName, base64.StdEncoding.EncodeToString(key))
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
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
