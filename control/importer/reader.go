// Package importer reads link exports of other shorteners (Bitly, YOURLS,
// Shlink; CSV or JSON) and uploads them through control's batch API,
// idempotently per chunk, so an interrupted import can simply be run again.
//
// Export formats, as their tools write them:
//
//   - Bitly: the v4 API's bitlink objects (JSON: {"links": [...]} or an
//     array) and CSV exports with the same names: long_url, link (the short
//     link, e.g. https://bit.ly/3abcXYZ), id (bit.ly/3abcXYZ), title,
//     created_at, tags, custom_bitlinks. "Long URL" / "Bitlink" spellings
//     are accepted too.
//   - YOURLS: its table's columns keyword, url, title, timestamp, ip, clicks
//     (CSV, with or without that header; JSON: an array of those objects, or
//     the API's {"links": {"link_1": {"shorturl", "url", …}}}).
//   - csv: a CSV of one's own with a header row naming its columns: url,
//     and if wanted code, domain, title, tags, redirect_type, expires_at,
//     max_clicks (plaincsv.go; docs/cli.md).
//   - Shlink: the web client's CSV export (createdAt, title, shortUrl,
//     domain, shortCode, longUrl, tags, visits; older ones lack shortCode)
//     and the API's short URL objects (shortCode, shortUrl, longUrl,
//     domain, …; JSON: an array or {"shortUrls": {"data": [...]}}). The
//     objects' meta.maxVisits becomes a click limit, meta.validUntil the
//     expiry and redirectRules rules (shlinkrules.go); the CSV carries
//     none of them.
//
// A row's domain (Record.Domain) is the host the source served it on:
// Shlink's domain column or key (the web client writes every row's host,
// its API null for the default domain), and the host of a Bitly short
// link unless it is one of Bitly's own (bit.ly, j.mp, bitly.com): a
// branded domain. YOURLS has one host and names none.
//
// Header names are compared case-insensitively, ignoring spaces, '_' and
// '-'. A malformed row (bad quoting, wrong number of fields, oversized, no
// URL) is reported as a Record with Err and reading goes on; only an
// unreadable input (unknown format, not UTF-8, a header without the needed
// columns) fails the whole read.
package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// Format is a source system.
type Format string

// Formats; Auto detects the format from the header or the first object.
const (
	Auto   Format = "auto"
	Bitly  Format = "bitly"
	YOURLS Format = "yourls"
	Shlink Format = "shlink"
	// CSV is a plain CSV of one's own (plaincsv.go): told from a header
	// with a url column and none of the other formats' markers.
	CSV Format = "csv"
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case "", Auto:
		return Auto, nil
	case Bitly, YOURLS, Shlink, CSV:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q: want auto, csv, bitly, yourls or shlink", s)
}

// MaxRecordBytes bounds one CSV record or JSON element; longer ones are
// reported and skipped.
const MaxRecordBytes = 1 << 20

// Record is one row of an export.
type Record struct {
	// Line is where the row starts: the CSV line (1-based) or the JSON
	// element's position (1-based).
	Line int
	// Code is the row's short code in the source system ("" if it has
	// none); URL its target.
	Code, URL string
	// Title and Tags are the row's, as the export has them ("" and nil
	// for none): a CSV's tags field is split at '|', ',' and ';' (Shlink's
	// web client joins them with '|'); JSON's tags are an array of strings.
	Title string
	Tags  []string
	// Domain is the host the source served the link on, as the export
	// writes it (not canonicalized): "" when it names none, the source's
	// default domain as the export spells it otherwise (see the package
	// comment).
	Domain string
	// RedirectType, ExpiresAt and MaxClicks are the row's own (the csv
	// format's columns, checked): 0 and the zero time for none, where the
	// import's options and the API's defaults decide.
	RedirectType int
	ExpiresAt    time.Time
	MaxClicks    int64
	// Rules are the row's routing rules, in the order they apply (a
	// Shlink object's redirect rules, shlinkrules.go); nil for none.
	Rules []link.Rule
	// Notes say what of the row's extras was carried with a difference
	// or left out (a Shlink rule skipped); they go in its outcome's
	// reason.
	Notes []string
	// Err, if set, says why the row is malformed; skip it.
	Err error
}

// Reader reads the Records of one export. It is not safe for concurrent
// use.
type Reader struct {
	format   Format
	encoding string // "csv" or "json"
	counter  *countingReader

	// CSV
	lines  *csvLines
	header int // fields in the header (0 headerless)
	cols   map[string]int
	pick   func(fields []string) (code, url, domain string)
	meta   func(fields []string) (title string, tags []string)
	// extra reads a row's other columns into rec (the csv format's);
	// ignored are the header's columns the format does not read.
	extra   func(fields []string, rec *Record)
	ignored []string

	// JSON
	js *jsonElements
}

// NewReader sniffs r (CSV or JSON; UTF-8, with or without a BOM) and, for
// Auto, the source format, and returns a Reader positioned at the first
// row.
func NewReader(r io.Reader, f Format) (*Reader, error) {
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 64<<10)
	head, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}):
		_, _ = br.Discard(3)
	case bytes.HasPrefix(head, []byte{0xFF, 0xFE}), bytes.HasPrefix(head, []byte{0xFE, 0xFF}):
		return nil, errors.New("the file is UTF-16: save it as UTF-8 (CSV UTF-8 in spreadsheets) and try again")
	}
	rd := &Reader{format: f, counter: cr}
	// Skip leading whitespace to see whether this is JSON.
	for {
		b, err := br.Peek(1)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the file is empty")
			}
			return nil, err
		}
		if b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n' {
			_, _ = br.Discard(1)
			continue
		}
		if b[0] == '[' || b[0] == '{' {
			if f == CSV {
				return nil, errors.New("this is JSON, not a CSV file: choose its source's format, or auto")
			}
			rd.encoding = "json"
			js, err := newJSONElements(br)
			if err != nil {
				return nil, err
			}
			rd.js = js
			return rd, nil
		}
		break
	}
	rd.encoding = "csv"
	return rd, rd.readHeader(br)
}

// Format is the source format read (detected for Auto).
func (r *Reader) Format() Format { return r.format }

// Encoding is "csv" or "json".
func (r *Reader) Encoding() string { return r.encoding }

// BytesRead is how much of the input has been consumed so far.
// It is safe to call from any goroutine.
func (r *Reader) BytesRead() int64 { return r.counter.n.Load() }

// Next returns the next row; io.EOF after the last. A malformed row is a
// Record with Err set, not an error: errors are for an input that cannot
// be read further.
func (r *Reader) Next() (Record, error) {
	if r.js != nil {
		return r.nextJSON()
	}
	return r.nextCSV()
}

// normName folds a column or key name: lower case, without spaces, '_'
// and '-'.
func normName(s string) string {
	var b strings.Builder
	for _, c := range strings.TrimSpace(s) {
		switch {
		case c == ' ' || c == '_' || c == '-' || c == '\t':
		case c >= 'A' && c <= 'Z':
			b.WriteRune(c + 'a' - 'A')
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// Column names per format, normalized; the first present wins.
var (
	urlNames       = []string{"longurl", "url", "destination", "destinationurl", "target"}
	bitlyCodeNames = []string{"link", "bitlink", "shortlink", "shorturl", "id"}
	shlinkCodeCols = []string{"shortcode"}
	shlinkURLCols  = []string{"shorturl"}
	yourlsHeadless = []string{"keyword", "url", "title", "timestamp", "ip", "clicks"}
)

// detect names the format whose columns (or keys) has holds.
func detect(has func(string) bool) Format {
	switch {
	case has("keyword") && (has("url") || has("longurl")):
		return YOURLS
	case has("longurl") && (has("shortcode") || (has("shorturl") && !has("link"))):
		return Shlink
	case has("longurl") && (has("link") || has("bitlink") || has("shortlink") || has("id")):
		return Bitly
	}
	return ""
}

func (r *Reader) readHeader(br *bufio.Reader) error {
	r.lines = newCSVLines(br, MaxRecordBytes)
	first, err := r.lines.physical()
	for err == nil && first.text == "" && !first.tooLong {
		first, err = r.lines.physical()
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("the file is empty")
		}
		return err
	}
	if first.tooLong {
		return fmt.Errorf("line %d: the header is longer than %d bytes: is this a CSV export?", first.n, MaxRecordBytes)
	}
	r.lines.comma = sniffComma(first.text)
	r.lines.pending = append(r.lines.pending, first)
	fields, line, err := r.lines.record()
	if err != nil {
		return fmt.Errorf("line %d: the header is not valid CSV: %w", line, err)
	}
	r.cols = make(map[string]int)
	for i, f := range fields {
		if n := normName(f); n != "" {
			if _, dup := r.cols[n]; !dup {
				r.cols[n] = i
			}
		}
	}
	has := func(n string) bool { _, ok := r.cols[n]; return ok }
	found := detect(has)
	if found == "" && has("url") {
		found = CSV // a url column and no other format's marker
	}
	if r.format == Auto {
		if found == "" {
			return fmt.Errorf("cannot tell the export's format from its header %q: give --format (a CSV of your own needs a url column; bitly needs long_url and link; yourls keyword and url; shlink longUrl and shortCode or shortUrl)", fields)
		}
		r.format = found
	}
	r.header = len(fields)
	col := func(names []string) int {
		for _, n := range names {
			if i, ok := r.cols[n]; ok {
				return i
			}
		}
		return -1
	}
	urlCol := col(urlNames)
	titleCol, tagsCol := col([]string{"title"}), col([]string{"tags"})
	r.meta = func(f []string) (string, []string) { return field(f, titleCol), splitTags(field(f, tagsCol)) }
	switch r.format {
	case YOURLS:
		code := col([]string{"keyword"})
		if code < 0 || urlCol < 0 {
			// YOURLS rows exported straight from its table carry no
			// header: keyword,url,title,timestamp,ip,clicks.
			if len(fields) >= 2 && looksLikeURL(fields[1]) {
				r.lines.pending = append([]physLine{{n: line, text: first.text}}, r.lines.pending...)
				r.header = 0
				code, urlCol = 0, 1
				r.meta = func(f []string) (string, []string) { return field(f, 2), nil }
			} else {
				return fmt.Errorf("a YOURLS export needs the columns keyword and url (or no header and %s); the header has %q",
					strings.Join(yourlsHeadless, ","), fields)
			}
		}
		r.pick = func(f []string) (string, string, string) { return field(f, code), field(f, urlCol), "" }
	case Shlink:
		code, short, domain := col(shlinkCodeCols), col(shlinkURLCols), col([]string{"domain"})
		if urlCol < 0 || (code < 0 && short < 0) {
			return fmt.Errorf("a Shlink export needs longUrl and shortCode (or shortUrl); the header has %q", fields)
		}
		r.pick = func(f []string) (string, string, string) {
			if c := field(f, code); c != "" {
				return c, field(f, urlCol), field(f, domain)
			}
			return codeFromShortURL(field(f, short)), field(f, urlCol), field(f, domain)
		}
	case Bitly:
		code := col(bitlyCodeNames)
		if urlCol < 0 || code < 0 {
			return fmt.Errorf("a Bitly export needs long_url and link (or id); the header has %q", fields)
		}
		r.pick = func(f []string) (string, string, string) {
			short := field(f, code)
			return codeFromShortURL(short), field(f, urlCol), bitlyDomain(short)
		}
	case CSV:
		return r.plainHeader(fields)
	default:
		return fmt.Errorf("unknown format %q", r.format)
	}
	return nil
}

func field(f []string, i int) string {
	if i < 0 || i >= len(f) {
		return ""
	}
	return strings.TrimSpace(f[i])
}

func looksLikeURL(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

func (r *Reader) nextCSV() (Record, error) {
	fields, line, err := r.lines.record()
	var bad *errRecord
	switch {
	case errors.As(err, &bad):
		return Record{Line: bad.line, Err: bad}, nil
	case err != nil:
		return Record{}, err
	}
	rec := Record{Line: line}
	if r.header > 0 && len(fields) > r.header {
		r.lines.giveBack()
		rec.Err = fmt.Errorf("row has %d fields, the header %d (an unquoted separator in a field?)", len(fields), r.header)
		return rec, nil
	}
	rec.Code, rec.URL, rec.Domain = r.pick(fields)
	rec.Title, rec.Tags = r.meta(fields)
	if r.extra != nil {
		r.extra(fields, &rec)
	}
	if len(r.lines.taken) > 0 && strings.ContainsAny(rec.Code+rec.URL+rec.Domain, "\n") {
		// A code, URL or domain over several lines is a quote left open
		// that swallowed the rows after it.
		r.lines.giveBack()
		return Record{Line: line, Err: errors.New("quoted field runs over the next lines (a quote left open?)")}, nil
	}
	if rec.URL == "" {
		rec.Err = errors.New("no URL in this row")
	}
	return rec, nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// jsonElements walks a JSON export one element at a time: a top-level
// array of link objects, or an object holding one under "links" (array or,
// as YOURLS's API answers, an object of objects), "data", "shortUrls"
// (Shlink: {"shortUrls": {"data": [...]}}) or "bitlinks".
type jsonElements struct {
	dec   *json.Decoder
	inMap bool // elements are an object's values
	// pendingKey: the first member's key of the map was read while
	// detecting the shape.
	pendingKey bool
	n          int
	done       bool
	err        error // a syntax error stopped the walk
}

var jsonListKeys = map[string]bool{"links": true, "data": true, "shorturls": true, "bitlinks": true, "urls": true}

func newJSONElements(r io.Reader) (*jsonElements, error) {
	j := &jsonElements{dec: json.NewDecoder(r)}
	j.dec.UseNumber()
	for depth := 0; depth < 3; depth++ {
		tok, err := j.dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the file is not valid JSON: %w", err)
		}
		if tok == json.Delim('[') {
			return j, nil
		}
		if tok != json.Delim('{') {
			return nil, errors.New("a JSON export must be an array of links or an object holding one under \"links\", \"data\" or \"shortUrls\"")
		}
		// An object: find the list's key, skipping other members.
		found := false
		for j.dec.More() {
			kt, err := j.dec.Token()
			if err != nil {
				return nil, fmt.Errorf("the file is not valid JSON: %w", err)
			}
			key, _ := kt.(string)
			if jsonListKeys[normName(key)] {
				found = true
				break
			}
			var skip json.RawMessage
			if err := j.dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("the file is not valid JSON: %w", err)
			}
		}
		if !found {
			return nil, errors.New("no list of links in this JSON object: expected \"links\", \"data\" or \"shortUrls\"")
		}
		// The value is an array (done), an object of link objects
		// (YOURLS), or an object holding the list (Shlink's data).
		if !j.dec.More() {
			return nil, errors.New("the list of links is empty")
		}
		// Peek by decoding the next token.
		vt, err := j.dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the file is not valid JSON: %w", err)
		}
		if vt == json.Delim('[') {
			return j, nil
		}
		if vt != json.Delim('{') {
			return nil, fmt.Errorf("the list of links is a %v, not an array", vt)
		}
		// An object: either {"data": [...]} (descend) or {"link_1": {...}}.
		if !j.dec.More() {
			j.done = true
			return j, nil
		}
		kt, err := j.dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the file is not valid JSON: %w", err)
		}
		key, _ := kt.(string)
		if jsonListKeys[normName(key)] {
			at, err := j.dec.Token()
			if err != nil {
				return nil, fmt.Errorf("the file is not valid JSON: %w", err)
			}
			if at != json.Delim('[') {
				return nil, fmt.Errorf("%q is not an array", key)
			}
			return j, nil
		}
		j.inMap = true
		j.pendingKey = true
		return j, nil
	}
	return nil, errors.New("no list of links found in the JSON")
}

func (r *Reader) nextJSON() (Record, error) {
	j := r.js
	if j.done || j.err != nil {
		return Record{}, io.EOF
	}
	if j.inMap && !j.pendingKey {
		if !j.dec.More() {
			j.done = true
			return Record{}, io.EOF
		}
		if _, err := j.dec.Token(); err != nil { // the member's key
			return j.stop(err)
		}
	}
	j.pendingKey = false
	if !j.dec.More() {
		j.done = true
		return Record{}, io.EOF
	}
	j.n++
	var raw json.RawMessage
	if err := j.dec.Decode(&raw); err != nil {
		return j.stop(err)
	}
	rec := Record{Line: j.n}
	if len(raw) > MaxRecordBytes {
		rec.Err = fmt.Errorf("element longer than %d bytes", MaxRecordBytes)
		return rec, nil
	}
	var obj map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil || obj == nil {
		rec.Err = fmt.Errorf("element is not a link object: %.60s", raw)
		return rec, nil
	}
	// Strings, and numbers only where a code may be one (YOURLS keywords
	// like 1234).
	vals := make(map[string]string, len(obj))
	keys := make(map[string]bool, len(obj))
	for k, v := range obj {
		n := normName(k)
		if keys[n] {
			continue
		}
		keys[n] = true
		switch v := v.(type) {
		case string:
			vals[n] = strings.TrimSpace(v)
		case json.Number:
			if n == "keyword" || n == "shortcode" {
				vals[n] = v.String()
			}
		}
	}
	has := func(n string) bool { return keys[n] }
	if r.format == Auto {
		// The first element decides, as a CSV header does.
		if f := detect(has); f != "" {
			r.format = f
		} else if has("shorturl") && has("url") {
			r.format = YOURLS // the API's list: shorturl, url, title, …
		} else {
			rec.Err = fmt.Errorf("cannot tell the format from this element's keys: give --format")
			return rec, nil
		}
	}
	get := func(names ...string) string {
		for _, n := range names {
			if v := vals[n]; v != "" {
				return v
			}
		}
		return ""
	}
	rec.URL = get(urlNames...)
	rec.Title = get("title")
	for k, v := range obj {
		if normName(k) != "tags" {
			continue
		}
		switch v := v.(type) {
		case []any:
			for _, t := range v {
				if t, ok := t.(string); ok {
					rec.Tags = append(rec.Tags, t)
				}
			}
		case string:
			rec.Tags = splitTags(v)
		}
		break
	}
	switch r.format {
	case YOURLS:
		rec.Code = get("keyword")
		if rec.Code == "" {
			rec.Code = codeFromShortURL(get("shorturl"))
		}
	case Shlink:
		rec.Code = get("shortcode")
		if rec.Code == "" {
			rec.Code = codeFromShortURL(get("shorturl"))
		}
		rec.Domain = get("domain") // null on the default domain
		var err error
		if rec.MaxClicks, rec.Rules, rec.Notes, err = shlinkExtras(obj); err != nil {
			rec.Err = err
			return rec, nil
		}
		if rec.ExpiresAt, err = shlinkValidity(obj, time.Now()); err != nil {
			rec.Err = err
			return rec, nil
		}
	case Bitly:
		short := get(bitlyCodeNames...)
		rec.Code, rec.Domain = codeFromShortURL(short), bitlyDomain(short)
	}
	if rec.URL == "" {
		rec.Err = errors.New("no URL (a non-empty string) in this element")
	}
	return rec, nil
}

// stop ends the walk at a syntax error: everything before it was read; the
// rest cannot be, and is reported as one bad record.
func (j *jsonElements) stop(err error) (Record, error) {
	j.err = err
	var se *json.SyntaxError
	msg := err.Error()
	if errors.As(err, &se) {
		msg = fmt.Sprintf("invalid JSON at byte %d (%v): the rest of the file cannot be read", se.Offset, se)
	} else if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "the JSON ends early (truncated file?): the rest cannot be read"
	}
	return Record{Line: j.n, Err: errors.New(msg)}, nil
}

// splitTags splits a CSV's tags field at '|', ',' and ';', none of which a
// tag may hold here.
func splitTags(s string) []string {
	var out []string
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == '|' || r == ',' || r == ';' }) {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
