package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	goqr "github.com/piglig/go-qr"

	"github.com/edgelink/edgelink/shared/link"
)

// QR code bounds. A side of 64 to 2,048 pixels covers a favicon to a
// print-ready poster; past that a client scales the SVG, which is
// resolution-free. The margin is the quiet zone in modules: ISO/IEC 18004
// asks for 4, and a printer that adds its own may want none.
const (
	QRDefaultSize   = 300
	QRMinSize       = 64
	QRMaxSize       = 2048
	QRDefaultMargin = 4
	QRMaxMargin     = 16
)

// qrRenderVersion is part of every ETag: a change to how codes are drawn
// must change it, so no client keeps an image drawn the old way.
const qrRenderVersion = "1"

// qrRequest is what GET /api/v1/links/{code}/qr asks for.
type qrRequest struct {
	svg     bool
	size    int // pixels on a side; 0: QRDefaultSize, or more if the code needs it
	margin  int // modules of quiet zone on each side
	ecc     goqr.Ecc
	eccName string
}

var qrEccs = map[string]goqr.Ecc{"L": goqr.Low, "M": goqr.Medium, "Q": goqr.Quartile, "H": goqr.High}

// qrParams are the query parameters of a QR request besides domain.
var qrParams = []string{"format", "size", "margin", "ecc"}

// parseQRQuery reads the query of a QR request, q (each parameter sent at
// most once: linkQuery checks that): format png (default) or svg, size in
// pixels, margin in modules, ecc L, M (default), Q or H. Names are
// case-sensitive, values of format and ecc are not. Anything else is
// link.ErrInvalidInput naming the problem.
func parseQRQuery(q url.Values) (qrRequest, error) {
	req := qrRequest{margin: QRDefaultMargin, ecc: goqr.Medium, eccName: "M"}
	var err error
	if v, ok := q["format"]; ok {
		switch strings.ToLower(v[0]) {
		case "png":
		case "svg":
			req.svg = true
		default:
			return req, fmt.Errorf("%w: format must be png or svg, not %.20q", link.ErrInvalidInput, v[0])
		}
	}
	if v, ok := q["size"]; ok {
		if req.size, err = boundedInt("size", v[0], QRMinSize, QRMaxSize, "pixels"); err != nil {
			return req, err
		}
	}
	if v, ok := q["margin"]; ok {
		if req.margin, err = boundedInt("margin", v[0], 0, QRMaxMargin, "modules"); err != nil {
			return req, err
		}
	}
	if v, ok := q["ecc"]; ok {
		name := strings.ToUpper(v[0])
		e, ok := qrEccs[name]
		if !ok {
			return req, fmt.Errorf("%w: ecc must be L, M, Q or H (7%%, 15%%, 25%% or 30%% of the code recoverable), not %.20q", link.ErrInvalidInput, v[0])
		}
		req.ecc, req.eccName = e, name
	}
	return req, nil
}

// boundedInt parses v, plain decimal digits, as an integer in [lo, hi].
func boundedInt(name, v string, lo, hi int, unit string) (int, error) {
	bad := fmt.Errorf("%w: %s must be a whole number of %s from %d to %d, not %.20q", link.ErrInvalidInput, name, unit, lo, hi, v)
	if v == "" || len(v) > 6 || strings.Trim(v, "0123456789") != "" {
		return 0, bad
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, bad
	}
	return n, nil
}

// encodeQR encodes text as a QR code at req's level and settles the
// image's side: req.size, or when none was asked for QRDefaultSize or as
// much more as the code needs. A size too small for the code's modules and
// margin is link.ErrInvalidInput saying what would fit.
func encodeQR(text string, req qrRequest) (*goqr.QrCode, int, error) {
	segs, err := goqr.MakeSegments(text)
	if err != nil {
		return nil, 0, fmt.Errorf("qr: segment %d bytes: %w", len(text), err)
	}
	// The level asked for, not a stronger one that happens to fit: what
	// a client asks for is what it gets.
	code, err := goqr.EncodeSegments(segs, req.ecc, goqr.MinVersion, goqr.MaxVersion, -1, false)
	if err != nil {
		return nil, 0, fmt.Errorf("qr: encode %d bytes: %w", len(text), err)
	}
	n := code.Size()
	modules := n + 2*req.margin
	size := req.size
	if size == 0 {
		size = max(QRDefaultSize, modules)
	}
	if size < modules {
		return nil, 0, fmt.Errorf("%w: size %d is too small for this code at ecc %s: its %d modules and a margin of %d need at least %d pixels",
			link.ErrInvalidInput, size, req.eccName, n, req.margin, modules)
	}
	return code, size, nil
}

// Both drawings are exactly size pixels on a side, every module the same
// whole number of pixels (crisp when printed or scanned) and the code
// centred: the pixels left over widen the quiet zone evenly. size is at
// least the code's modules and twice the margin (encodeQR).

// qrPNG draws code as a two-colour PNG (one bit per pixel).
func qrPNG(code *goqr.QrCode, size, margin int) ([]byte, error) {
	n := code.Size()
	scale := size / (n + 2*margin)
	off := (size - scale*n) / 2
	img := image.NewPaletted(image.Rect(0, 0, size, size), color.Palette{color.White, color.Black})
	for y := range n {
		for x := range n {
			if !code.Module(x, y) {
				continue
			}
			for py := off + y*scale; py < off+(y+1)*scale; py++ {
				row := img.Pix[py*img.Stride:]
				for px := off + x*scale; px < off+(x+1)*scale; px++ {
					row[px] = 1
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("qr: encode png: %w", err)
	}
	return buf.Bytes(), nil
}

// qrSVG draws code as an SVG of size by size: one path, a rectangle per run of dark modules in a
// row. It holds nothing but numbers, so no link's data reaches markup.
func qrSVG(code *goqr.QrCode, size, margin int) []byte {
	n := code.Size()
	scale := size / (n + 2*margin)
	// The viewBox counts pixels, as the PNG does: centred in modules the
	// offset would be a fraction.
	off := (size - scale*n) / 2
	var b bytes.Buffer
	b.Grow(512 + n*n*4)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" shape-rendering="crispEdges">`, size, size, size, size)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/><path fill="#000000" d="`, size, size)
	for y := range n {
		for x := 0; x < n; {
			if !code.Module(x, y) {
				x++
				continue
			}
			run := 1
			for x+run < n && code.Module(x+run, y) {
				run++
			}
			fmt.Fprintf(&b, "M%d %dh%dv%dh-%dz", off+x*scale, off+y*scale, run*scale, scale, run*scale)
			x += run
		}
	}
	b.WriteString(`"/></svg>` + "\n")
	return b.Bytes()
}

// qrETag names one rendering: the text it encodes and how it was drawn.
func qrETag(text string, req qrRequest, format string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s\x00%s", qrRenderVersion, format, req.size, req.margin, req.eccName, text)
	return `"qr-` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

// noneMatch reports whether an If-None-Match header value matches etag
// (RFC 9110 13.1.2: weak comparison, or *).
func noneMatch(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

// linkQR answers GET /api/v1/links/{code}/qr: the link's short URL as a QR
// code. The image depends only on the short URL and the parameters, which
// a code keeps for life (codes are never reused), so a console may cache
// it; a deleted link answers 410, as the edges do.
func (s *Server) linkQR(w http.ResponseWriter, r *http.Request, tenant int64) {
	domain, q, err := s.linkQuery(r, qrParams...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := parseQRQuery(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := s.links.Get(r.Context(), tenant, domain, r.PathValue("code"))
	if err == nil && l.Status == link.Deleted {
		err = link.ErrDeleted
	}
	if err != nil {
		s.writeLinkError(w, r, domain, err)
		return
	}
	text := s.short.of(l)
	code, size, err := encodeQR(text, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.size = size
	format, contentType := "png", "image/png"
	if req.svg {
		format, contentType = "svg", "image/svg+xml"
	}
	etag := qrETag(text, req, format)
	h := w.Header()
	// private: the answer is for this key's holder; Vary keeps a browser
	// shared by two tenants from answering one with the other's image.
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("Vary", "Authorization")
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && noneMatch(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	var body []byte
	if req.svg {
		body = qrSVG(code, size, req.margin)
	} else if body, err = qrPNG(code, size, req.margin); err != nil {
		h.Del("ETag")
		h.Del("Vary")
		s.writeError(w, r, err)
		return
	}
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	// An SVG opened on its own is a document: it may run nothing.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
