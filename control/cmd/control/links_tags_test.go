package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	goqr "github.com/piglig/go-qr"
)

// TestLinksTagsAndQR: create with a title and tags, list by tag and by
// search, change tags in bulk, and write a QR code that decodes back to
// the short URL.
func TestLinksTagsAndQR(t *testing.T) {
	url, key, _ := apiServer(t)
	env := map[string]string{"EDGELINK_API_KEY": key, "EDGELINK_DATABASE_URL": ""}
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCLIEnv(t, env, append([]string{"links", "--api-url", url}, args...)...)
		if err != nil {
			t.Fatalf("links %v: %v (%s)", args, err, errOut)
		}
		return out
	}
	out := cli("create", "https://example.com/a", "--code", "tagged-a", "--title", "Spring poster", "--tag", "Spring Sale", "--tag", "q2,print")
	if !strings.Contains(out, "title          Spring poster") || !strings.Contains(out, "tags           print, q2, spring-sale") {
		t.Errorf("create printed %q; want the title and the normalized tags", out)
	}
	cli("create", "https://other.example/b", "--code", "tagged-b", "--tag", "q2")

	codes := func(out string) []string {
		var p struct {
			Links []struct{ Code string } `json:"links"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		var cs []string
		for _, l := range p.Links {
			cs = append(cs, l.Code)
		}
		return cs
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--tag", "q2"}, []string{"tagged-b", "tagged-a"}},
		{[]string{"--tag", "q2,print", "--tag-mode", "all"}, []string{"tagged-a"}},
		{[]string{"--search", "poster"}, []string{"tagged-a"}},
		{[]string{"-q", "other.example"}, []string{"tagged-b"}},
	} {
		if got := codes(cli(append([]string{"--json", "list"}, tc.args...)...)); !slices.Equal(got, tc.want) {
			t.Errorf("list %v: %v; want %v", tc.args, got, tc.want)
		}
	}

	out = cli("tag", "tagged-a", "tagged-b", "--add", "Autumn", "--remove", "q2")
	if !strings.Contains(out, "tagged-a  autumn, print, spring-sale") || !strings.Contains(out, "tagged-b  autumn") {
		t.Errorf("tag printed %q", out)
	}
	if _, _, err := runCLIEnv(t, env, "links", "--api-url", url, "tag", "tagged-a"); err == nil {
		t.Error("tag without --add or --remove succeeded")
	}
	if _, _, err := runCLIEnv(t, env, "links", "--api-url", url, "tag", "tagged-a", "nope-code", "--add", "x"); err == nil || !strings.Contains(err.Error(), "nope-code") {
		t.Errorf("tag of an unknown code: %v; want an error naming it", err)
	}

	file := filepath.Join(t.TempDir(), "a.png")
	cli("qr", "tagged-a", "--out", file, "--size", "200", "--ecc", "H")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if text, err := goqr.Decode(img); err != nil || text != "https://sho.rt/tagged-a" || img.Bounds().Dx() != 200 {
		t.Errorf("the QR file decodes to %q (%v), %d px; want the short URL at 200 px", text, err, img.Bounds().Dx())
	}
	if svg := cli("qr", "tagged-a", "--format", "svg"); !strings.HasPrefix(svg, "<svg ") {
		t.Errorf("qr --format svg to stdout printed %.60q", svg)
	}
	if _, _, err := runCLIEnv(t, env, "links", "--api-url", url, "qr", "tagged-a", "--size", "10"); err == nil || !strings.Contains(err.Error(), "size must be") {
		t.Errorf("qr --size 10: %v; want the API's 400", err)
	}
}
