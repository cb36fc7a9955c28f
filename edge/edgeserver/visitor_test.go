package edgeserver_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// TestClicksCarryVisitors: two edges, watching the salt bucket control
// fills, publish one visitor hash for the same client and User-Agent
// (forwarded by a trusted proxy), another for another client, and the
// client's address in no message.
func TestClicksCarryVisitors(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	natstest.ChangeStream(t, js)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, clicks.StreamConfig()); err != nil {
		t.Fatal(err)
	}
	// The salts as control writes them: today's and tomorrow's (UTC), so
	// a midnight during the test changes nothing.
	if _, err := js.CreateStream(ctx, clicks.SaltStreamConfig()); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, clicks.SaltBucket)
	if err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for i, day := range []time.Time{today, today.Add(24 * time.Hour)} {
		if _, err := kv.Update(ctx, clicks.SaltKey(day), bytes.Repeat([]byte{byte(i + 1)}, clicks.SaltLen), 0); err != nil {
			t.Fatal(err)
		}
	}

	start := func(name string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(10)), snapshotFile(t, 10, false), 0o644); err != nil {
			t.Fatal(err)
		}
		ectx, cancel := context.WithCancel(context.Background())
		addr := make(chan net.Addr, 1)
		done := make(chan error, 1)
		go func() {
			done <- edgeserver.Run(ectx, edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), Name: name,
				SnapshotDir: dir, TrustedProxies: []string{"127.0.0.1"}, ClickFlushEvery: 20 * time.Millisecond,
				OnListen: func(a net.Addr) { addr <- a }})
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("edge %s: %v", name, err)
			}
		})
		select {
		case a := <-addr:
			return "http://" + a.String()
		case err := <-done:
			done <- err
			t.Fatalf("edge %s stopped before it listened: %v", name, err)
			return ""
		}
	}
	bases := []string{start("v1"), start("v2")}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	follow := func(base, xff, ua string) int {
		req, err := http.NewRequest(http.MethodGet, base+"/m-00001", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = snapshottest.PlatformHost
		req.Header.Set("X-Forwarded-For", xff)
		req.Header.Set("User-Agent", ua)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0"
	for _, base := range bases {
		poll.Until(t, "the snapshot's link redirects with today's salt held", 60*time.Second, func() bool {
			return metric(t, base, "edge_visitor_salts") == 2 && follow(base, "198.51.100.77", firefox) == http.StatusFound
		})
		for _, xff := range []string{"203.0.113.9", "2001:db8::9"} {
			if s := follow(base, xff, firefox); s != http.StatusFound {
				t.Fatalf("%s: GET from %s: %d", base, xff, s)
			}
		}
	}

	cons, err := js.OrderedConsumer(ctx, clicks.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	byEdge := map[string][]clicks.Click{}
	poll.Until(t, "the clicks published", 60*time.Second, func() bool {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			return false
		}
		for msg := range batch.Messages() {
			for _, secret := range []string{"203.0.113.9", "2001:db8::9", "\xcb\x00\x71\x09", "Firefox/125"} {
				if bytes.Contains(msg.Data(), []byte(secret)) {
					t.Fatalf("a CLICKS message holds %q", secret)
				}
			}
			b, err := clicks.Decode(msg.Data())
			if err != nil {
				t.Fatalf("decode a CLICKS message: %v", err)
			}
			byEdge[b.Edge] = append(byEdge[b.Edge], b.Clicks...)
		}
		return len(byEdge["v1"]) >= 3 && len(byEdge["v2"]) >= 3
	})
	// Each edge's last two clicks: 203.0.113.9 then 2001:db8::9.
	last2 := func(cs []clicks.Click) (uint64, uint64) { return cs[len(cs)-2].Visitor, cs[len(cs)-1].Visitor }
	a1, b1 := last2(byEdge["v1"])
	a2, b2 := last2(byEdge["v2"])
	if a1 == 0 || a1 != a2 || b1 != b2 || a1 == b1 {
		t.Fatalf("visitor hashes: v1 %#x %#x, v2 %#x %#x; want one client's equal on both edges and the two clients apart", a1, b1, a2, b2)
	}
	for _, c := range byEdge["v1"] {
		if c.Browser != clicks.BrowserFirefox || c.OS != clicks.OSLinux {
			t.Fatalf("click %+v: browser %v os %v; want firefox on linux", c, c.Browser, c.OS)
		}
	}
	for _, base := range bases {
		if v := metric(t, base, "edge_clicks_without_visitor_total", "cause", "no_salt"); v != 0 {
			t.Errorf("%s: %v clicks without a salt", base, v)
		}
	}
}
