package ff1

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
)

// ErrNoKey is returned by Keys.Codes for a key name the file does not hold.
var ErrNoKey = errors.New("ff1: no key of that name")

// Keys are the operator's code keys, by name: what control and every edge
// read from the same file (--code-keys), so that a domain's configuration
// carries key names and never key bytes. A Keys prints only its names.
type Keys struct {
	keys map[string][]byte
}

var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// LoadKeys reads a key file: one "name base64-key" per line (16, 24 or 32
// bytes of key in standard or URL-safe base64), blank lines and lines
// starting with '#' ignored. An empty path gives no keys.
func LoadKeys(path string) (*Keys, error) {
	if path == "" {
		return &Keys{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ff1: code keys: %w", err)
	}
	defer f.Close()
	return ParseKeys(f)
}

// ParseKeys reads a key file's contents (see LoadKeys). Errors name the
// line, never its contents.
func ParseKeys(r io.Reader) (*Keys, error) {
	k := &Keys{keys: map[string][]byte{}}
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		fields := bytes.Fields(line)
		if len(fields) != 2 || !keyName.Match(fields[0]) {
			return nil, fmt.Errorf("ff1: code keys line %d: want \"name base64-key\"", n)
		}
		name := string(fields[0])
		if _, dup := k.keys[name]; dup {
			return nil, fmt.Errorf("ff1: code keys line %d: name given twice", n)
		}
		key, err := decodeKey(fields[1])
		if err != nil {
			return nil, fmt.Errorf("ff1: code keys line %d: %w", n, err)
		}
		if _, err := newBlock(key); err != nil {
			return nil, fmt.Errorf("ff1: code keys line %d: %w", n, err)
		}
		k.keys[name] = key
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ff1: code keys: %w", err)
	}
	return k, nil
}

func decodeKey(b []byte) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(string(b)); err == nil {
			return key, nil
		}
	}
	return nil, errors.New("key is not base64")
}

// Has reports whether the file holds a key of that name.
func (k *Keys) Has(name string) bool {
	_, ok := k.keys[name]
	return ok
}

// Names are the key names, sorted.
func (k *Keys) Names() []string {
	names := make([]string, 0, len(k.keys))
	for n := range k.keys {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Codes is domain's permutation under the named key.
func (k *Keys) Codes(name, domain string) (*Codes, error) {
	key, ok := k.keys[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoKey, name)
	}
	return NewCodes(key, domain)
}

// String prints the names only.
func (k *Keys) String() string { return fmt.Sprintf("ff1.Keys%v", k.Names()) }

// GoString prints the names only.
func (k *Keys) GoString() string { return k.String() }
