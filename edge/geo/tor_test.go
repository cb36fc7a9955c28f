package geo

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadTorRejects: every malformed line is refused with the file, the
// line number and what is wrong with it.
func TestReadTorRejects(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"two fields", "# x\n1,2\n", "test line 2: want three fields"},
		{"four fields", "1,2,US,x\n", "test line 1: want three fields"},
		{"not a number", "1,2x,US\n", `test line 1: range end: "2x" is neither`},
		{"too large", "1,4294967296,US\n", "test line 1: range end: \"4294967296\" is larger than an IPv4 address"},
		{"negative", "-1,2,US\n", `test line 1: range start: "-1" is neither`},
		{"bad v6", "2001::x,2001::1,US\n", `test line 1: range start: "2001::x" is not an address`},
		{"zone", "fe80::1%eth0,fe80::2,US\n", "has a zone"},
		{"empty start", ",2,US\n", "test line 1: range start: empty"},
		{"mixed", "1,::1,US\n", "mixes IPv4 and IPv6"},
		{"backwards", "\n\n10,2,US\n", "test line 3: range 0.0.0.10-0.0.0.2 ends before it starts"},
		{"backwards v6", "::9,::1,US\n", "ends before it starts"},
		{"country digits", "1,2,U1\n", `test line 1: country "U1" is not two letters`},
		{"country long", "1,2,USA\n", `country "USA"`},
		{"country utf8", "1,2,ÜS\n", "is not two letters"},
		{"overlap", "1,10,US\n5,20,DE\n", "test line 2: range 0.0.0.5-0.0.0.20 overlaps 0.0.0.1-0.0.0.10 of test line 1"},
		{"overlap unsorted", "50,60,US\n1,10,DE\n10,10,FR\n", "test line 3: range 0.0.0.10-0.0.0.10 overlaps 0.0.0.1-0.0.0.10 of test line 2"},
		{"duplicate", "1,10,US\n1,10,US\n", "overlaps"},
		{"overlap past the end", "4294967295,4294967295,US\n4294967295,4294967295,DE\n", "overlaps"},
		{"overlap v6", "2001::,2001::ff,US\n2001::80,2001::1ff,DE\n", "test line 2: range 2001::80-2001::1ff overlaps 2001::-2001::ff of test line 1"},
		{"overlap v6 end", "::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,US\n::5,::6,DE\n", "overlaps"},
		{"only comments", "# nothing\n\n", "no address ranges"},
		{"long line", "1,2,US\n" + strings.Repeat("9", 5000) + ",1,US\n", "test line 2: longer than 4096 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTor("test", strings.NewReader(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ReadTor(%q) = %v; want an error containing %q", c.text, err, c.want)
			}
		})
	}
}

// TestReadTorAccepts: the forms the files use, and some they might.
func TestReadTorAccepts(t *testing.T) {
	tb := mustTor(t, "  # indented comment\r\n16777216,16777471,AU\r\n1.0.1.0,1.0.1.255,cn\n"+
		" 2001:4860::, 2001:4860:ffff:ffff:ffff:ffff:ffff:ffff , US \n::ffff:9.9.9.0,::ffff:9.9.9.255,US\n"+
		"# Generated: Thu, 25 Jun 2026 04:33:59 GMT\n# Generated: not a date\n")
	check(t, tb, "1.0.0.7", "AU")
	check(t, tb, "1.0.1.7", "CN")
	check(t, tb, "2001:4860:4860::8888", "US")
	check(t, tb, "9.9.9.9", "US") // a mapped range is an IPv4 range
	if got := tb.Info().Generated.Format("2006-01-02T15:04:05Z07:00"); got != "2026-06-25T04:33:59Z" {
		t.Errorf("Generated = %s", got)
	}
}

// TestLoadTorNamesTheFile: a bad line in one of several files names that
// file.
func TestLoadTorNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "geoip"), filepath.Join(dir, "geoip6")
	if err := os.WriteFile(good, []byte("16777216,16777471,AU\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("# header\n2001::,2001::ff,US\n2001::x,2001::1,US\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadTor(dir)
	if err == nil || !strings.Contains(err.Error(), bad+" line 3") {
		t.Fatalf("LoadTor = %v; want %s line 3 named", err, bad)
	}
	// An overlap across files names both.
	if err := os.WriteFile(bad, []byte("::ffff:1.0.0.0,::ffff:1.0.0.9,US\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadTor(dir)
	if err == nil || !strings.Contains(err.Error(), bad+" line 1") || !strings.Contains(err.Error(), good+" line 1") {
		t.Fatalf("LoadTor = %v; want both files' lines named", err)
	}
}

// FuzzReadTor: no input panics; whatever parses gives, at each end of each
// range it read, that range's country.
func FuzzReadTor(f *testing.F) {
	for _, name := range []string{"geoip", "geoip6"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		// A few of its data lines: long seeds make the fuzzer spend its
		// time minimizing.
		seed := []byte("# Generated: Thu, 25 Jun 2026 04:33:59 GMT\n")
		for l := range bytes.Lines(b) {
			if len(l) > 0 && l[0] != '#' && len(seed) < 400 {
				seed = append(seed, l...)
			}
		}
		f.Add(seed)
	}
	f.Add([]byte("0,4294967295,US\n"))
	f.Add([]byte("::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,??\n1,2,DE\n"))
	f.Add([]byte("1,10,US\n5,20,DE\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := ReadTor("fuzz", bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		for l := range bytes.Lines(data) {
			l = bytes.TrimSpace(l)
			if len(l) == 0 || l[0] == '#' {
				continue
			}
			lo, hi, c, err := parseTorLine(l)
			if err != nil {
				t.Fatalf("ReadTor took line %q that parseTorLine refuses: %v", l, err)
			}
			for _, a := range []netip.Addr{lo, hi} {
				cc, ok := tb.Lookup(a)
				if ok != (c != [2]byte{}) || cc != c {
					t.Fatalf("line %q: Lookup(%v) = %q, %v; want %q", l, a, cc[:], ok, c[:])
				}
			}
		}
	})
}
