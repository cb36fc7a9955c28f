package unlock

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"os"
	"regexp"
	"sync"
)

// Keys are the keys that sign unlock cookies and form tokens: the first
// signs, every one verifies. Every edge behind one set of hosts must hold
// the same keys, or a cookie one edge set is refused by the next (the
// visitor is asked the password again: nothing worse). Rotation, in three
// rollouts of the file to every edge: add the new key after the current
// one (everyone verifies it), move it first (everyone signs with it),
// remove the old one once CookieTTL has passed. Safe for concurrent use.
type Keys struct {
	keys []*key // keys[0] signs
}

type key struct {
	name string
	id   uint32 // names the key in a token: the first 4 bytes of HMAC(key, "key id")
	// macs hold HMAC-SHA256 states keyed with it, reset between uses, so
	// a token is signed or checked without allocating.
	macs sync.Pool
}

// MinKeyLen and MaxKeyLen bound a key's bytes: at least HMAC-SHA256's
// output, at most its block.
const (
	MinKeyLen = 32
	MaxKeyLen = 64
)

var keyName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// LoadKeys reads a key file: lines "name base64-key" (standard base64 of
// 32 to 64 random bytes, `openssl rand -base64 32`), blank lines and
// lines starting with # ignored; the first key signs. Errors name the file
// and the line, never a key.
func LoadKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("unlock keys: %w", err)
	}
	defer f.Close()
	k, err := ParseKeys(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ParseKeys reads a key file's contents (LoadKeys). It refuses a file
// without a key.
func ParseKeys(r io.Reader) (*Keys, error) {
	k := &Keys{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		fields := bytes.Fields(line)
		if len(fields) != 2 || !keyName.Match(fields[0]) {
			return nil, fmt.Errorf("unlock keys line %d: want \"name base64-key\"", n)
		}
		name := string(fields[0])
		if seen[name] {
			return nil, fmt.Errorf("unlock keys line %d: name given twice", n)
		}
		seen[name] = true
		b, err := base64.StdEncoding.Strict().DecodeString(string(fields[1]))
		if err != nil {
			return nil, fmt.Errorf("unlock keys line %d: the key is not standard base64", n)
		}
		if len(b) < MinKeyLen || len(b) > MaxKeyLen {
			return nil, fmt.Errorf("unlock keys line %d: a key of %d bytes, want %d to %d", n, len(b), MinKeyLen, MaxKeyLen)
		}
		kk := newKey(name, b)
		for _, other := range k.keys {
			if other.id == kk.id {
				return nil, fmt.Errorf("unlock keys line %d: the same key as %q", n, other.name)
			}
		}
		k.keys = append(k.keys, kk)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("unlock keys: %w", err)
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("unlock keys: no key")
	}
	return k, nil
}

// RandomKeys is one fresh random key, for an edge given no key file: its
// cookies hold only on that edge, until it restarts.
func RandomKeys() *Keys {
	b := make([]byte, MinKeyLen)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return &Keys{keys: []*key{newKey("random", b)}}
}

func newKey(name string, secret []byte) *key {
	secret = bytes.Clone(secret)
	k := &key{name: name}
	k.macs.New = func() any { return &macState{h: hmac.New(sha256.New, secret)} }
	m := k.get()
	m.h.Write([]byte("edgelink unlock key id"))
	k.id = binary.BigEndian.Uint32(m.h.Sum(m.sum[:0]))
	k.put(m)
	return k
}

// Names are the key names, the signing one first.
func (k *Keys) Names() []string {
	names := make([]string, len(k.keys))
	for i, kk := range k.keys {
		names[i] = kk.name
	}
	return names
}

// String prints the names only.
func (k *Keys) String() string { return fmt.Sprintf("unlock.Keys%v", k.Names()) }

// GoString prints the names only.
func (k *Keys) GoString() string { return k.String() }

func (k *Keys) signing() *key { return k.keys[0] }

func (k *Keys) byID(id uint32) *key {
	for _, kk := range k.keys {
		if kk.id == id {
			return kk
		}
	}
	return nil
}

// macState is one HMAC state and the room to build a message in.
type macState struct {
	h   hash.Hash
	msg [512]byte
	sum [sha256.Size]byte
}

func (k *key) get() *macState {
	m := k.macs.Get().(*macState)
	m.h.Reset()
	return m
}

func (k *key) put(m *macState) { k.macs.Put(m) }
