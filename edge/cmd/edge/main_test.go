package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/logbuf"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
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

// TestGeoIPFlags: --geoip and --geoip-mmdb (and their environment
// variables) exclude each other, and country data that does not load stops
// the edge before it connects to anything, naming the file and line.
func TestGeoIPFlags(t *testing.T) {
	base := []string{"--listen", "127.0.0.1:0", "--snapshot-dir", "none", "--nats-url", "nats://127.0.0.1:1"}
	bad := filepath.Join(t.TempDir(), "geoip")
	if err := os.WriteFile(bad, []byte("# header\n16777216,16777471,AU\n16777472,x,CN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"both flags", []string{"--geoip", "../../geo/testdata", "--geoip-mmdb", "x.mmdb"}, nil, "both name country data"},
		{"flag and env", []string{"--geoip", "../../geo/testdata"}, map[string]string{"EDGELINK_EDGE_GEOIP_MMDB": "x.mmdb"}, "both name country data"},
		// A cleared variable is unset: the other is used.
		{"cleared geoip", nil, map[string]string{"EDGELINK_EDGE_GEOIP": "", "EDGELINK_EDGE_GEOIP_MMDB": bad}, "load mmdb " + bad},
		{"bad line", []string{"--geoip", bad}, map[string]string{"EDGELINK_EDGE_GEOIP_MMDB": ""}, bad + " line 3: range end"},
		{"missing dir", []string{"--geoip", t.TempDir()}, nil, "geoip"},
		{"missing mmdb", nil, map[string]string{"EDGELINK_EDGE_GEOIP_MMDB": filepath.Join(t.TempDir(), "none.mmdb")}, "none.mmdb"},
		{"not an mmdb", []string{"--geoip-mmdb", bad}, nil, "load mmdb " + bad},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			err := run(context.Background(), append(c.args, base...), io.Discard, io.Discard, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run %v: %v; want an error containing %q", c.args, err, c.want)
			}
		})
	}
}

// TestGeoIPLoadedAtStart: with --geoip the edge loads the data before it
// serves, logs its source, date and size, and exports its date.
func TestGeoIPLoadedAtStart(t *testing.T) {
	ns := natstest.Start(t)
	var logs logbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--geoip", "../../geo/testdata", "--listen", "127.0.0.1:0", "--snapshot-dir", "none",
			"--nats-url", ns.ClientURL()}, io.Discard, &logs, func(a net.Addr) { addr <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge: %v", err)
		}
	})
	var a net.Addr
	select {
	case a = <-addr:
	case err := <-done:
		done <- err
		t.Fatalf("edge stopped before it listened: %v\n%s", err, logs.String())
	}
	if l := logs.String(); !strings.Contains(l, `msg="country data loaded"`) || !strings.Contains(l, "generated=2026-06-25") ||
		!strings.Contains(l, "ipv6_ranges=") || !strings.Contains(l, filepath.Join("testdata", "geoip6")) {
		t.Errorf("start-up log lacks the country data's source, date or size:\n%s", l)
	}
	var metrics string
	if err := poll.Wait(ctx, "edge metrics", 30*time.Second, func() bool {
		resp, err := http.Get("http://" + a.String() + "/-/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		t.Fatal(err)
	}
	// 2026-06-25T04:33:59Z, the fixture's "Generated:" line.
	if !strings.Contains(metrics, "edge_geo_data_timestamp_seconds 1.782362039e+09") ||
		!strings.Contains(metrics, `edge_geo_lookups_total{outcome="unknown"} 0`) {
		t.Errorf("metrics lack the country data's date or the lookup counters:\n%s", grepLines(metrics, "edge_geo"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestUnlockFlags: --unlock-keys (and EDGELINK_EDGE_UNLOCK_KEYS) reach the
// edge, which refuses a key file it cannot read before it connects to
// anything, naming the line and never a key; a cookie lifetime or a
// verifier count out of bounds is refused too.
func TestUnlockFlags(t *testing.T) {
	base := []string{"--listen", "127.0.0.1:0", "--snapshot-dir", "none", "--nats-url", "nats://127.0.0.1:1"}
	const secret = "c2VjcmV0LWJ5dGVz" // 12 bytes: too short a key
	bad := filepath.Join(t.TempDir(), "unlock-keys")
	if err := os.WriteFile(bad, []byte("# keys\nk1 "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"short key", []string{"--unlock-keys", bad}, nil, "unlock keys line 2"},
		{"env", nil, map[string]string{"EDGELINK_EDGE_UNLOCK_KEYS": bad}, "unlock keys line 2"},
		{"missing file", []string{"--unlock-keys", filepath.Join(t.TempDir(), "none")}, nil, "unlock keys"},
		{"cookie ttl", []string{"--unlock-cookie-ttl", "48h"}, nil, "--unlock-cookie-ttl 48h0m0s"},
		{"cookie ttl short", []string{"--unlock-cookie-ttl", "10s"}, nil, "want 1m to 24h"},
		{"verifiers", []string{"--unlock-verifiers", "0"}, nil, "--unlock-verifiers 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			err := run(context.Background(), append(append([]string{}, base...), c.args...), io.Discard, io.Discard, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
				t.Fatalf("run: %v; want an error with %q and no key", err, c.want)
			}
		})
	}
}

// TestLimitReportFlag: --limit-report-every (and its variable) out of
// bounds is refused before the edge connects to anything; a negative
// value is no reports (edgeserver.Config.LimitReportEvery).
func TestLimitReportFlag(t *testing.T) {
	base := []string{"--listen", "127.0.0.1:0", "--snapshot-dir", "none", "--nats-url", "nats://127.0.0.1:1"}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"too often", []string{"--limit-report-every", "1ms"}, nil, "--limit-report-every 1ms"},
		{"zero", []string{"--limit-report-every", "0s"}, nil, "want 10ms to 1m"},
		{"env", nil, map[string]string{"EDGELINK_EDGE_LIMIT_REPORT_EVERY": "2m"}, "--limit-report-every 2m0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			err := run(context.Background(), append(append([]string{}, base...), c.args...), io.Discard, io.Discard, nil)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.want)) {
				t.Fatalf("run: %v; want an error with %q", err, c.want)
			}
		})
	}
}
