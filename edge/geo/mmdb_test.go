package geo

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/oschwald/maxminddb-golang/v2"
	"go4.org/netipx"
)

// The .mmdb fixtures are written by each test with MaxMind's own writer
// (github.com/maxmind/mmdbwriter), in the schemas LoadMMDB reads; nothing
// binary is committed, and no MaxMind data is used.

type network struct {
	cidr string
	rec  mmdbtype.Map
}

func iso(cc string) mmdbtype.Map { return mmdbtype.Map{"iso_code": mmdbtype.String(cc)} }

const buildEpoch = 1_782_345_600 // 2026-06-25T00:00:00Z

// writeMMDB writes networks to an .mmdb file in the test's directory.
func writeMMDB(t testing.TB, opts mmdbwriter.Options, nets []network) string {
	t.Helper()
	if opts.DatabaseType == "" {
		opts.DatabaseType = "GeoLite2-Country"
	}
	opts.BuildEpoch = buildEpoch
	opts.Description = map[string]string{"en": "edgelink test networks"}
	opts.Languages = []string{"en"}
	tree, err := mmdbwriter.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		_, ipnet, err := net.ParseCIDR(n.cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(ipnet, n.rec); err != nil {
			t.Fatalf("insert %s: %v", n.cidr, err)
		}
	}
	path := filepath.Join(t.TempDir(), "test.mmdb")
	var buf bytes.Buffer
	if _, err := tree.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var schemaNets = []network{
	// GeoLite2/GeoIP2 Country and City (DB-IP's too): country.iso_code,
	// with names and other fields beside it.
	{"8.8.8.0/24", mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("US"),
		"names": mmdbtype.Map{"en": mmdbtype.String("United States")}, "geoname_id": mmdbtype.Uint32(6252001)},
		"continent": mmdbtype.Map{"code": mmdbtype.String("NA")}, "registered_country": iso("US")}},
	{"2001:4860::/32", mmdbtype.Map{"country": iso("US")}},
	{"81.2.69.0/24", mmdbtype.Map{"country": iso("gb"), "city": mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String("London")}}}},
	// Only a registered country (anycast, satellite providers).
	{"1.1.1.0/24", mmdbtype.Map{"registered_country": iso("AU")}},
	// IPinfo's flat country_code.
	{"2a01:4f8::/32", mmdbtype.Map{"country_code": mmdbtype.String("DE")}},
	// A record that names no country.
	{"9.9.9.0/24", mmdbtype.Map{"continent": mmdbtype.Map{"code": mmdbtype.String("EU")}}},
	// Networks at the ends of each space.
	{"1.0.0.0/24", mmdbtype.Map{"country": iso("AU")}},
	{"223.255.255.0/24", mmdbtype.Map{"country": iso("AU")}},
	{"2c0f:ffff::/32", mmdbtype.Map{"country": iso("ZA")}},
}

func TestLoadMMDBSchemas(t *testing.T) {
	for _, v := range []int{6, 4} {
		nets := schemaNets
		if v == 4 {
			nets = nil
			for _, n := range schemaNets {
				if !strings.Contains(n.cidr, ":") {
					nets = append(nets, n)
				}
			}
		}
		path := writeMMDB(t, mmdbwriter.Options{IPVersion: v}, nets)
		tb, err := LoadMMDB(path)
		if err != nil {
			t.Fatalf("IPv%d database: %v", v, err)
		}
		for _, c := range []struct{ addr, want string }{
			{"8.8.8.8", "US"}, {"::ffff:8.8.8.8", "US"}, {"8.8.9.1", ""}, {"8.8.7.255", ""},
			{"81.2.69.142", "GB"}, {"1.1.1.1", "AU"}, {"9.9.9.9", ""}, {"10.0.0.1", ""}, {"127.0.0.1", ""},
			{"1.0.0.0", "AU"}, {"223.255.255.255", "AU"},
		} {
			check(t, tb, c.addr, c.want)
		}
		if v == 6 {
			check(t, tb, "2001:4860:4860::8888", "US")
			check(t, tb, "2a01:4f8::1", "DE")
			check(t, tb, "2c0f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ZA")
			check(t, tb, "2a01:4f9::1", "")
		}
		info := tb.Info()
		if !info.Generated.Equal(info.Generated.UTC()) || info.Generated.Unix() != buildEpoch ||
			!strings.Contains(info.Source, "GeoLite2-Country") || !strings.Contains(info.Source, path) || info.Unknown != 1 {
			t.Errorf("IPv%d: Info() = %+v; want the build epoch, type and path, 1 unknown record", v, info)
		}
	}
}

// TestMMDBMatchesReader: for random addresses, the Table built from a
// database answers what the library's own per-lookup decode answers.
func TestMMDBMatchesReader(t *testing.T) {
	path := writeMMDB(t, mmdbwriter.Options{}, schemaNets)
	tb, err := LoadMMDB(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := maxminddb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20_000 {
		var a netip.Addr
		switch i % 3 {
		case 0: // anywhere in IPv4, and near the networks
			a = netip.AddrFrom4([4]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		case 1:
			n := netip.MustParsePrefix(schemaNets[rng.IntN(len(schemaNets))].cidr)
			b := n.Addr().As16()
			for j := n.Bits()/8 - 1; j < 16; j++ {
				if j >= 0 {
					b[j] ^= byte(rng.IntN(256) * rng.IntN(2))
				}
			}
			a = netip.AddrFrom16(b)
			if n.Addr().Is4() {
				a = netip.AddrFrom4([4]byte(b[:4]))
			}
		default: // global unicast IPv6, outside the IPv4 aliases
			a = netip.AddrFrom16([16]byte{0x2a, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), 15: byte(rng.IntN(256))})
		}
		var rec mmdbRecord
		if err := db.Lookup(a).Decode(&rec); err != nil {
			t.Fatal(err)
		}
		want, _ := parseCode([]byte(rec.code()))
		got, ok := tb.Lookup(a)
		if ok != (want != [2]byte{}) || got != want {
			t.Fatalf("Lookup(%v) = %q, %v; the reader says %q", a, got[:], ok, want[:])
		}
	}
}

// TestMMDBAndTorAgree: the fixture's IPFire ranges written as an .mmdb and
// loaded give what the Tor files give: both sources share one table.
func TestMMDBAndTorAgree(t *testing.T) {
	tor, err := LoadTor("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var nets []network
	for _, name := range []string{"geoip", "geoip6"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		for l := range bytes.Lines(b) {
			l = bytes.TrimSpace(l)
			if len(l) == 0 || l[0] == '#' {
				continue
			}
			lo, hi, c, err := parseTorLine(l)
			if err != nil {
				t.Fatal(err)
			}
			if c == [2]byte{} {
				continue
			}
			for _, p := range netipx.IPRangeFrom(lo, hi).Prefixes() {
				nets = append(nets, network{p.String(), mmdbtype.Map{"country": iso(string(c[:]))}})
			}
		}
	}
	mm, err := LoadMMDB(writeMMDB(t, mmdbwriter.Options{IncludeReservedNetworks: true}, nets))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range known {
		check(t, mm, k.addr, k.cc)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 50_000 {
		var a netip.Addr
		if i%2 == 0 {
			a = netip.AddrFrom4([4]byte{byte(rng.IntN(224)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		} else {
			a = netip.AddrFrom16([16]byte{0x20, byte(rng.IntN(256) & 0x0f), byte(rng.IntN(256)), byte(rng.IntN(256)), 15: 1})
			if a.Is4In6() || netip.MustParsePrefix("2002::/16").Contains(a) || netip.MustParsePrefix("2001::/32").Contains(a) {
				continue // the writer's IPv4 aliases
			}
		}
		c1, ok1 := tor.Lookup(a)
		c2, ok2 := mm.Lookup(a)
		if c1 != c2 || ok1 != ok2 {
			t.Fatalf("Lookup(%v): tor %q %v, mmdb %q %v", a, c1[:], ok1, c2[:], ok2)
		}
	}
}

func TestLoadMMDBRejects(t *testing.T) {
	good := writeMMDB(t, mmdbwriter.Options{}, schemaNets)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(data)
	for i := 0; i < len(flipped)/3; i += 7 { // the search tree
		flipped[i] ^= 0xa5
	}
	for _, c := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "nope.mmdb"), "nope.mmdb"},
		{"empty", write("empty.mmdb", nil), "empty.mmdb"},
		{"not an mmdb", write("text.mmdb", []byte("16777216,16777471,AU\n")), "text.mmdb"},
		{"truncated", write("trunc.mmdb", data[:len(data)/2]), "trunc.mmdb"},
		{"corrupt tree", write("flipped.mmdb", flipped), "flipped.mmdb"},
		{"bad code", writeMMDB(t, mmdbwriter.Options{}, []network{{"8.8.8.0/24", mmdbtype.Map{"country": iso("USA")}}}),
			`network 8.8.8.0/24: country "USA" is not two letters`},
		{"wrong type", writeMMDB(t, mmdbwriter.Options{}, []network{{"8.8.8.0/24", mmdbtype.Map{"country": mmdbtype.String("US")}}}),
			"network 8.8.8.0/24"},
		{"no networks", writeMMDB(t, mmdbwriter.Options{}, nil), "no address ranges"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadMMDB(c.path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("LoadMMDB = %v; want an error containing %q", err, c.want)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	for _, c := range []struct{ p, lo, hi string }{
		{"0.0.0.0/0", "0.0.0.0", "255.255.255.255"},
		{"8.8.8.7/24", "8.8.8.0", "8.8.8.255"},
		{"8.8.8.8/32", "8.8.8.8", "8.8.8.8"},
		{"::/0", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
		{"2001:db8::/32", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"},
		{"2001:db8::/64", "2001:db8::", "2001:db8::ffff:ffff:ffff:ffff"},
		{"2001:db8::/65", "2001:db8::", "2001:db8::7fff:ffff:ffff:ffff"},
		{"2001:db8::1/128", "2001:db8::1", "2001:db8::1"},
		{"::ffff:1.2.3.0/120", "1.2.3.0", "1.2.3.255"},
	} {
		lo, hi := bounds(netip.MustParsePrefix(c.p))
		if lo.String() != c.lo || hi.String() != c.hi {
			t.Errorf("bounds(%s) = %v, %v; want %s, %s", c.p, lo, hi, c.lo, c.hi)
		}
	}
}
