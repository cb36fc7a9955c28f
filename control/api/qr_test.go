package api

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	goqr "github.com/piglig/go-qr"

	"github.com/edgelink/edgelink/shared/link"
)

// TestQRDecodesToTheShortURL: every format, level and margin draws an
// image of the size asked for that a QR decoder reads back as the link's
// short URL, at the level asked for.
func TestQRDecodesToTheShortURL(t *testing.T) {
	e, key := newEnvWithTenant(t)
	r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/qr", "code": "summer-sale_2026-poster-campaign"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %v", r)
	}
	shortURL := r.json(t)["short_url"].(string)

	for _, tc := range []struct {
		query  string
		format string
		size   int
		ecc    goqr.Ecc
	}{
		{"", "png", QRDefaultSize, goqr.Medium},
		{"?format=png&size=64&margin=0&ecc=L", "png", 64, goqr.Low},
		{"?format=PNG&size=333&margin=1&ecc=q", "png", 333, goqr.Quartile},
		{"?format=png&size=2048&margin=16&ecc=H", "png", 2048, goqr.High},
		{"?format=svg", "svg", QRDefaultSize, goqr.Medium},
		{"?format=svg&size=101&margin=2&ecc=L", "svg", 101, goqr.Low},
		{"?format=svg&size=1000&margin=8&ecc=H", "svg", 1000, goqr.High},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := e.do(t, "GET", "/api/v1/links/summer-sale_2026-poster-campaign/qr"+tc.query, key, nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET qr%s: %v", tc.query, r)
			}
			var img image.Image
			switch tc.format {
			case "png":
				if ct := r.header.Get("Content-Type"); ct != "image/png" {
					t.Fatalf("Content-Type %q; want image/png", ct)
				}
				var err error
				if img, err = png.Decode(bytes.NewReader(r.body)); err != nil {
					t.Fatalf("the body is not a PNG: %v", err)
				}
			case "svg":
				if ct := r.header.Get("Content-Type"); ct != "image/svg+xml" {
					t.Fatalf("Content-Type %q; want image/svg+xml", ct)
				}
				img = rasterizeSVG(t, r.body)
			}
			if b := img.Bounds(); b.Dx() != tc.size || b.Dy() != tc.size {
				t.Errorf("image is %dx%d; want %dx%d", b.Dx(), b.Dy(), tc.size, tc.size)
			}
			res, err := goqr.DecodeDetailed(img)
			if err != nil {
				t.Fatalf("decode the QR code: %v", err)
			}
			if res.Text != shortURL || res.Ecc != tc.ecc {
				t.Errorf("decoded %q at level %d; want %q at %d", res.Text, res.Ecc, shortURL, tc.ecc)
			}
			if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "private") || !strings.Contains(cc, "max-age=") {
				t.Errorf("Cache-Control %q; want private with a max-age", cc)
			}
			if r.header.Get("ETag") == "" {
				t.Error("no ETag")
			}
		})
	}
}

// svgPath is what qrSVG draws: one rectangle per run of dark modules.
var (
	svgSize = regexp.MustCompile(`^<svg [^>]*width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"`)
	svgPath = regexp.MustCompile(`<path fill="#000000" d="([^"]*)"/>`)
	svgRect = regexp.MustCompile(`^M(\d+) (\d+)h(\d+)v(\d+)h-(\d+)z`)
)

// rasterizeSVG paints the SVG the API drew, pixel for pixel of its
// viewBox, failing on anything it does not expect to find there.
func rasterizeSVG(t *testing.T, svg []byte) image.Image {
	t.Helper()
	m := svgSize.FindSubmatch(svg)
	if m == nil || string(m[1]) != string(m[3]) || string(m[2]) != string(m[4]) || string(m[1]) != string(m[2]) {
		t.Fatalf("SVG does not start with a square <svg> whose viewBox counts its pixels: %.200s", svg)
	}
	size, _ := strconv.Atoi(string(m[1]))
	p := svgPath.FindSubmatch(svg)
	if p == nil {
		t.Fatalf("SVG has no dark path: %.300s", svg)
	}
	img := image.NewGray(image.Rect(0, 0, size, size))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	d := p[1]
	for len(d) > 0 {
		r := svgRect.FindSubmatch(d)
		if r == nil {
			t.Fatalf("path data %.40q is not a run rectangle", d)
		}
		n := make([]int, 5)
		for i := range n {
			n[i], _ = strconv.Atoi(string(r[i+1]))
		}
		x, y, w, h := n[0], n[1], n[2], n[3]
		if n[4] != w || x+w > size || y+h > size {
			t.Fatalf("rectangle %s leaves the image or does not close", r[0])
		}
		for py := y; py < y+h; py++ {
			for px := x; px < x+w; px++ {
				img.SetGray(px, py, color.Gray{})
			}
		}
		d = d[len(r[0]):]
	}
	return img
}

func TestQRCachingAndStates(t *testing.T) {
	e, key := newEnvWithTenant(t)
	other := e.tenant(t, "globex")
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/", "code": "cache-me"}`)); r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	first := e.do(t, "GET", "/api/v1/links/cache-me/qr?format=svg", key, nil)
	etag := first.header.Get("ETag")
	if first.status != 200 || etag == "" {
		t.Fatalf("first QR: %v, ETag %q", first, etag)
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr?format=svg", key, nil, "If-None-Match", etag); r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != etag {
		t.Errorf("revalidation with its ETag: %v, ETag %q; want 304 with no body and the same ETag", r, r.header.Get("ETag"))
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr?format=svg", key, nil, "If-None-Match", `"other", W/`+etag); r.status != http.StatusNotModified {
		t.Errorf("revalidation with a list holding its weak ETag: %v; want 304", r)
	}
	for _, q := range []string{"?format=png", "?format=svg&size=301", "?format=svg&margin=3", "?format=svg&ecc=H"} {
		r := e.do(t, "GET", "/api/v1/links/cache-me/qr"+q, key, nil, "If-None-Match", etag)
		if r.status != 200 || r.header.Get("ETag") == etag {
			t.Errorf("%s with the ETag of format=svg: %v, ETag %q; want 200 with another ETag", q, r, r.header.Get("ETag"))
		}
	}
	// Unknown, another tenant's and deleted codes; no key.
	if r := e.do(t, "GET", "/api/v1/links/no-such-code/qr", key, nil); r.status != http.StatusNotFound {
		t.Errorf("unknown code: %v; want 404", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr", other, nil); r.status != http.StatusNotFound {
		t.Errorf("another tenant's code: %v; want 404", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr", other, nil, "If-None-Match", etag); r.status != http.StatusNotFound {
		t.Errorf("another tenant's code with the owner's ETag: %v; want 404", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no key: %v; want 401", r)
	}
	if r := e.do(t, "PATCH", "/api/v1/links/cache-me", key, []byte(`{"status": "disabled"}`)); r.status != 200 {
		t.Fatalf("disable: %v", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr", key, nil); r.status != 200 {
		t.Errorf("disabled link: %v; want 200 (it may be enabled again)", r)
	}
	if r := e.do(t, "DELETE", "/api/v1/links/cache-me", key, nil); r.status != 204 {
		t.Fatalf("delete: %v", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr", key, nil); r.status != http.StatusGone {
		t.Errorf("deleted link: %v; want 410", r)
	}
	if r := e.do(t, "GET", "/api/v1/links/cache-me/qr", key, nil, "If-None-Match", etag); r.status != http.StatusGone {
		t.Errorf("deleted link with its old ETag: %v; want 410", r)
	}
}

// TestQRBadParameters: each malformed, out-of-range or hostile parameter
// is a 400 problem naming it, before the image is drawn.
func TestQRBadParameters(t *testing.T) {
	e, key := newEnvWithTenant(t)
	long := strings.Repeat("x", 32)
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/", "code": "`+long+`"}`)); r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	for _, tc := range []struct{ query, detail string }{
		{"format=gif", "format must be png or svg"},
		{"format=", "format must be png or svg"},
		{"format=png%00", "format must be png or svg"},
		{"format=png&format=svg", "send format once"},
		{"size=63", "size must be a whole number of pixels from 64 to 2048"},
		{"size=2049", "size must be"},
		{"size=-300", "size must be"},
		{"size=%2B300", "size must be"},
		{"size=3e2", "size must be"},
		{"size=300.0", "size must be"},
		{"size=", "size must be"},
		{"size=99999999999999999999999", "size must be"},
		{"size=0x100", "size must be"},
		{"margin=17", "margin must be a whole number of modules from 0 to 16"},
		{"margin=-1", "margin must be"},
		{"ecc=X", "ecc must be L, M, Q or H"},
		{"ecc=LOW", "ecc must be"},
		{"ecc=", "ecc must be"},
		{"colour=red", `unknown query parameter "colour"`},
		{"Format=png", `unknown query parameter "Format"`},
		{"size=%zz", "malformed"},
		{"size=64&margin=16&ecc=H", "too small for this code"},
		{"format=" + strings.Repeat("<script>", 1000), "format must be png or svg"},
	} {
		r := e.do(t, "GET", "/api/v1/links/"+long+"/qr?"+tc.query, key, nil)
		detail, _ := r.json(t)["detail"].(string)
		if r.status != http.StatusBadRequest || !strings.Contains(detail, tc.detail) {
			t.Errorf("?%.60s: %v; want 400 saying %q", tc.query, r, tc.detail)
		}
		if len(detail) > 300 {
			t.Errorf("?%.60s: the detail echoes the input at length: %q", tc.query, detail)
		}
	}
}

// TestQRDrawsOnlyTheCode: a QR image is nothing but the code; the SVG, a
// document when opened alone, holds no element or attribute beyond the
// drawing and may run nothing.
func TestQRDrawsOnlyTheCode(t *testing.T) {
	e, key := newEnvWithTenant(t)
	if r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/alert?q=%3Csvg%20onload=alert(1)%3E&x='"}`)); r.status != 201 {
		t.Fatalf("create: %v", r)
	}
	r := e.do(t, "GET", "/api/v1/links/000001/qr?format=svg", key, nil)
	if r.status != 200 {
		t.Fatalf("qr: %v", r)
	}
	if got := regexp.MustCompile(`<(\w+)`).FindAllSubmatch(r.body, -1); len(got) != 3 {
		t.Errorf("SVG has elements %q; want svg, rect and path only", got)
	}
	if bytes.Contains(r.body, []byte("example.com")) || bytes.Contains(r.body, []byte("alert")) {
		t.Errorf("SVG carries the link's data: %.300s", r.body)
	}
	for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'"} {
		if got := r.header.Get(h); !strings.Contains(got, want) {
			t.Errorf("%s = %q; want it to hold %q", h, got, want)
		}
	}
	if n, _ := strconv.Atoi(r.header.Get("Content-Length")); n != len(r.body) {
		t.Errorf("Content-Length %q for %d bytes", r.header.Get("Content-Length"), len(r.body))
	}
}

// FuzzQRQuery: any query string is refused as invalid input or read into
// a request within the bounds.
func FuzzQRQuery(f *testing.F) {
	for _, s := range []string{"", "format=svg&size=64&margin=0&ecc=h", "size=%zz", "size=2049", "ecc=Q&ecc=Q", "size=+1", "margin=16"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := checkLinkQuery(raw, qrParams)
		var req qrRequest
		if err == nil {
			req, err = parseQRQuery(q)
		}
		if err != nil {
			if !errors.Is(err, link.ErrInvalidInput) {
				t.Fatalf("parseQRQuery(%q): %v is not invalid input", raw, err)
			}
			return
		}
		if (req.size != 0 && (req.size < QRMinSize || req.size > QRMaxSize)) || req.margin < 0 || req.margin > QRMaxMargin || qrEccs[req.eccName] != req.ecc {
			t.Fatalf("parseQRQuery(%q) = %+v: out of bounds", raw, req)
		}
	})
}
