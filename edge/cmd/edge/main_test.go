package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCodeKeysFlag: --code-keys (and EDGELINK_CODE_KEYS) reach the edge,
// which refuses a file it cannot read before it connects to anything,
// naming the line and never its contents.
func TestCodeKeysFlag(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "code-keys")
	const secret = "c2VjcmV0LWJ5dGVzLXRoYXQtbXVzdC1ub3Qtc2hvdw"
	if err := os.WriteFile(bad, []byte("k1 "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"--code-keys", bad, "--listen", "127.0.0.1:0", "--snapshot-dir", "none",
		"--nats-url", "nats://127.0.0.1:1"}, io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "code keys line 1") || strings.Contains(err.Error(), secret) {
		t.Fatalf("run with a bad --code-keys: %v; want the line named, not its contents", err)
	}
	t.Setenv("EDGELINK_CODE_KEYS", filepath.Join(t.TempDir(), "missing"))
	err = run(context.Background(), []string{"--listen", "127.0.0.1:0", "--snapshot-dir", "none", "--nats-url", "nats://127.0.0.1:1"},
		io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "code keys") {
		t.Fatalf("run with EDGELINK_CODE_KEYS naming no file: %v; want a code keys error", err)
	}
}
