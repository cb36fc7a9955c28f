package geo

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// known are addresses whose country the shipped IPFire data and the
// fixture cut from it agree on, and which are unlikely to move: public
// resolvers, root servers, regional registries.
var known = []struct{ addr, cc string }{
	{"8.8.8.8", "US"},
	{"1.1.1.1", "AU"},
	{"9.9.9.9", "US"},
	{"193.0.6.139", "NL"},  // RIPE NCC
	{"202.12.27.33", "JP"}, // M root, WIDE
	{"200.160.0.8", "BR"},  // NIC.br
	{"213.180.204.3", "RU"},
	{"194.25.2.129", "DE"},
	{"81.2.69.142", "GB"},
	{"2001:4860:4860::8888", "US"},
	{"2606:4700:4700::1111", "US"},
	{"2001:67c:2e8::2", "NL"}, // RIPE NCC
	{"2001:dc3::35", "JP"},    // M root
	{"2001:12ff::8", "BR"},
	{"2a01:4f8::1", "DE"},
	{"2a00:1450:4001::1", "IE"},
	{"::ffff:8.8.8.8", "US"}, // IPv4-mapped: the IPv4 table
}

// nowhere are addresses no country has: private, loopback, link-local,
// shared, documentation, multicast, reserved.
var nowhere = []string{
	"127.0.0.1", "10.1.2.3", "172.16.5.4", "192.168.1.1", "100.64.0.1", "169.254.1.1", "192.0.2.7",
	"203.0.113.5", "224.0.0.1", "0.0.0.0", "255.255.255.255",
	"::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "2001:db8::1", "ff02::1",
}

// shippedData is the directory `go tool task geoip` unpacks Debian's
// tor-geoipdb into: .data/geoip at the module's root. Under the Taskfile
// (EDGELINK_GEOIP=required) a missing copy fails the test; a plain `go
// test` skips, saying so.
func shippedData(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	data := filepath.Join(dir, ".data", "geoip")
	for _, f := range []string{"geoip", "geoip6"} {
		if _, err := os.Stat(filepath.Join(data, f)); err != nil {
			msg := fmt.Sprintf("%s is missing: run `go tool task geoip` (apt-get download tor-geoipdb, unpacked; `go tool task test` does it)", filepath.Join(data, f))
			if os.Getenv("EDGELINK_GEOIP") == "required" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return data
}

var regenerate = flag.Bool("regenerate-fixture", false, "rewrite testdata/geoip and geoip6 from the shipped data in .data/geoip")

// TestRegenerateFixture rewrites the fixture from the shipped data when
// asked (-regenerate-fixture): every header comment line (the data's
// source, date and licence), the ranges holding the known addresses and
// two either side, and every 997th range for breadth. Lines are copied
// unchanged, so the fixture stays a subset of the data it names.
func TestRegenerateFixture(t *testing.T) {
	if !*regenerate {
		t.Skip("run with -regenerate-fixture to rewrite testdata from .data/geoip")
	}
	data := shippedData(t)
	for _, name := range []string{"geoip", "geoip6"} {
		src, err := os.ReadFile(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimRight(src, "\n"), []byte("\n"))
		keep := make([]bool, len(lines))
		n := 0
		for i, l := range lines {
			if len(l) > 0 && l[0] == '#' {
				keep[i] = true
				continue
			}
			if n%997 == 0 {
				keep[i] = true
			}
			n++
			lo, hi, _, err := parseTorLine(l)
			if err != nil {
				t.Fatalf("%s line %d: %v", name, i+1, err)
			}
			for _, k := range known {
				a := netip.MustParseAddr(k.addr).Unmap()
				if !a.Less(lo) && !hi.Less(a) {
					for j := max(i-2, 0); j <= min(i+2, len(lines)-1); j++ {
						keep[j] = true
					}
				}
			}
		}
		var out bytes.Buffer
		for i, l := range lines {
			if keep[i] {
				out.Write(l)
				out.WriteByte('\n')
			}
		}
		if err := os.WriteFile(filepath.Join("testdata", name), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFixtureIsShippedData: when the shipped data is of the generation the
// fixture was cut from, every line of the fixture is a line of it.
func TestFixtureIsShippedData(t *testing.T) {
	data := shippedData(t)
	for _, name := range []string{"geoip", "geoip6"} {
		full, err := os.ReadFile(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		fixture, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if generated(full) != generated(fixture) {
			t.Skipf("%s: shipped data generated %q, the fixture's %q: regenerate the fixture (-regenerate-fixture) to compare", name, generated(full), generated(fixture))
		}
		lines := map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader(full))
		for sc.Scan() {
			lines[sc.Text()] = true
		}
		sc = bufio.NewScanner(bytes.NewReader(fixture))
		for i := 1; sc.Scan(); i++ {
			if !lines[sc.Text()] {
				t.Errorf("testdata/%s line %d %q is not in %s", name, i, sc.Text(), filepath.Join(data, name))
			}
		}
	}
}

func generated(b []byte) string {
	for l := range bytes.Lines(b) {
		if _, rest, ok := bytes.Cut(l, []byte("# Generated:")); ok {
			return string(bytes.TrimSpace(rest))
		}
	}
	return ""
}
