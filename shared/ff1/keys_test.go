package ff1

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFile(t *testing.T) {
	k32 := make([]byte, 32)
	for i := range k32 {
		k32[i] = byte(i)
	}
	k16 := k32[:16]
	file := "# code keys\n\n" +
		"acme-2026 " + base64.StdEncoding.EncodeToString(k32) + "\n" +
		"  old.1\t" + base64.RawURLEncoding.EncodeToString(k16) + "  \n"
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keys.Names()); got != "[acme-2026 old.1]" || !keys.Has("old.1") || keys.Has("nope") {
		t.Fatalf("names %s", got)
	}
	c, err := keys.Codes("acme-2026", "go.acme.com")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewCodes(k32, "go.acme.com")
	a, _ := c.Encode(12345)
	b, _ := want.Encode(12345)
	if a != b {
		t.Fatal("the file's key is not the key it holds")
	}
	if _, err := keys.Codes("nope", "go.acme.com"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("missing key: %v", err)
	}
	// The key never prints.
	secret := base64.StdEncoding.EncodeToString(k32)
	for _, s := range []string{fmt.Sprint(keys), fmt.Sprintf("%v %+v %#v %s", keys, keys, keys, keys)} {
		if strings.Contains(s, secret) || strings.Contains(s, string(k32)) || strings.Contains(s, "0 1 2 3") {
			t.Fatalf("key material printed: %s", s)
		}
	}
	empty, err := LoadKeys("")
	if err != nil || len(empty.Names()) != 0 {
		t.Fatalf("no file: %v %v", empty, err)
	}
}

func TestKeyFileRefusals(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(make([]byte, 32))
	secretish := base64.StdEncoding.EncodeToString([]byte("0123456789abcdefXYZ")) // 19 bytes: wrong size
	for name, file := range map[string]string{
		"one field":  "lonely\n",
		"three":      "a " + good + " extra\n",
		"bad name":   "-x " + good + "\n",
		"not base64": "a !!!!\n",
		"wrong size": "a " + secretish + "\n",
		"twice":      "a " + good + "\na " + good + "\n",
		"long name":  strings.Repeat("n", 65) + " " + good + "\n",
	} {
		_, err := ParseKeys(strings.NewReader(file))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), secretish) || strings.Contains(err.Error(), good) {
			t.Errorf("%s: the error shows the key: %v", name, err)
		}
		if !strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: the error names no line: %v", name, err)
		}
	}
	if _, err := LoadKeys(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file was accepted")
	}
}
