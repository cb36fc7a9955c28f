package geo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// LoadTor reads Tor's geoip files into a Table. Each path is a file, or a
// directory holding both `geoip` (IPv4) and `geoip6` (IPv6), as
// /usr/share/tor from Debian's tor-geoipdb does. A file that is missing,
// unreadable or malformed, or files that hold no range at all, are an error
// that names the file (and the line).
func LoadTor(paths ...string) (*Table, error) {
	start := time.Now()
	if len(paths) == 0 {
		return nil, errors.New("load tor geoip: no file named")
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("load tor geoip: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		for _, name := range []string{"geoip", "geoip6"} {
			f := filepath.Join(p, name)
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("load tor geoip: directory %s: %w", p, err)
			}
			files = append(files, f)
		}
	}
	b := newBuilder()
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("load tor geoip: %w", err)
		}
		var size int64
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
		err = b.readTor(name, f, size)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("load tor geoip: %w", err)
		}
	}
	t, err := b.finish("tor geoip: " + strings.Join(files, ", "))
	if err != nil {
		return nil, fmt.Errorf("load tor geoip: %w", err)
	}
	t.info.Load = time.Since(start)
	return t, nil
}

// ReadTor builds a Table from one file in Tor's geoip or geoip6 format,
// named name in errors.
func ReadTor(name string, r io.Reader) (*Table, error) {
	b := newBuilder()
	if err := b.readTor(name, r, 0); err != nil {
		return nil, err
	}
	return b.finish("tor geoip: " + name)
}

// finish builds the table, refusing one without a single range: a file
// that parsed but holds nothing is not what an operator asking for
// countries meant.
func (b *builder) finish(source string) (*Table, error) {
	if len(b.v4) == 0 && len(b.v6) == 0 {
		return nil, errors.New(strings.Join(b.files, ", ") + ": no address ranges")
	}
	b.info.Source = source
	return b.build()
}

// maxLine bounds one line of a Tor file; the longest real one is about 90
// bytes.
const maxLine = 4 << 10

// readTor parses one file of Tor's format: a line is `lo,hi,CC`, where lo
// and hi are both decimal integers (an IPv4 address as a number, the
// geoip file) or both IPv6 addresses in text (geoip6), and CC the country
// ("??" unknown); `#` starts a comment line, and blank lines are skipped.
// Dotted IPv4 text is taken too. The header's "Generated:" line, when
// present, dates the data. size, when known, is the file's length: the
// ranges are allocated for it at once rather than grown by copying.
func (b *builder) readTor(name string, r io.Reader, size int64) error {
	file := b.file(name)
	sized := size <= 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxLine)
	line := int32(0)
	for sc.Scan() {
		line++
		s := bytes.TrimSpace(sc.Bytes())
		if len(s) == 0 {
			continue
		}
		if s[0] == '#' {
			b.header(s)
			continue
		}
		lo, hi, c, err := parseTorLine(s)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", name, line, err)
		}
		if !sized {
			// Lines run about 25 bytes in geoip and 55 in geoip6.
			if lo.Is4() {
				b.v4 = slices.Grow(b.v4, int(min(size, 1<<30)/24))
			} else {
				b.v6 = slices.Grow(b.v6, int(min(size, 1<<30)/48))
			}
			sized = true
		}
		b.add(lo, hi, c, at{file: file, line: line})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s line %d: longer than %d bytes", name, line+1, maxLine)
		}
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

// header takes the data's date from a comment line like
// "# Generated: Thu, 25 Jun 2026 04:33:59 GMT", keeping the oldest date of
// the files read.
func (b *builder) header(s []byte) {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(s[1:]), []byte("Generated:"))
	if !ok {
		return
	}
	at, err := time.Parse(time.RFC1123, string(bytes.TrimSpace(rest)))
	if err != nil {
		return // a comment, not worth refusing the file for
	}
	if b.info.Generated.IsZero() || at.Before(b.info.Generated) {
		b.info.Generated = at.UTC()
	}
}

func parseTorLine(s []byte) (lo, hi netip.Addr, c [2]byte, err error) {
	f1, rest, ok1 := bytes.Cut(s, []byte{','})
	f2, f3, ok2 := bytes.Cut(rest, []byte{','})
	if !ok1 || !ok2 || bytes.IndexByte(f3, ',') >= 0 {
		return lo, hi, c, errors.New("want three fields, lo,hi,CC")
	}
	if lo, err = parseTorAddr(bytes.TrimSpace(f1)); err != nil {
		return lo, hi, c, fmt.Errorf("range start: %w", err)
	}
	if hi, err = parseTorAddr(bytes.TrimSpace(f2)); err != nil {
		return lo, hi, c, fmt.Errorf("range end: %w", err)
	}
	if lo.Is4() != hi.Is4() {
		return lo, hi, c, fmt.Errorf("range %v-%v mixes IPv4 and IPv6", lo, hi)
	}
	if hi.Less(lo) {
		return lo, hi, c, fmt.Errorf("range %v-%v ends before it starts", lo, hi)
	}
	f3 = bytes.TrimSpace(f3)
	if c, ok1 = parseCode(f3); !ok1 {
		return lo, hi, c, fmt.Errorf("country %q is not two letters or ??", truncate(f3))
	}
	return lo, hi, c, nil
}

// parseTorAddr reads an address as Tor's files write it: IPv4 as a decimal
// number, IPv6 in text (dotted IPv4 text is accepted too). An IPv4-mapped
// IPv6 address is its IPv4 address.
func parseTorAddr(s []byte) (netip.Addr, error) {
	if len(s) == 0 {
		return netip.Addr{}, errors.New("empty")
	}
	if bytes.IndexAny(s, ":.") < 0 {
		var n uint64
		for _, ch := range s {
			if ch < '0' || ch > '9' {
				return netip.Addr{}, fmt.Errorf("%q is neither a number nor an address", truncate(s))
			}
			n = n*10 + uint64(ch-'0')
			if n > 1<<32-1 {
				return netip.Addr{}, fmt.Errorf("%q is larger than an IPv4 address", truncate(s))
			}
		}
		return num4(uint32(n)), nil
	}
	a, err := netip.ParseAddr(string(s))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an address", truncate(s))
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q has a zone", truncate(s))
	}
	return a.Unmap(), nil
}

// truncate keeps an error message short when a line is long or binary.
func truncate(s []byte) string {
	if len(s) > 48 {
		return string(s[:48]) + "…"
	}
	return string(s)
}
