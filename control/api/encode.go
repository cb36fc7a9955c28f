package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/links"
)

// Links are written by hand rather than through encoding/json: a batch
// answer is 1,000 of them, and reflection, an apiwire.Link and two time
// strings per link cost more than the rest of the answer. The bytes are
// exactly what encoding/json writes for the apiwire types (checked by
// TestEncodeIsEncodingJSON), so clients and replays see no difference.

// buffers recycles answer buffers; each Server has its own.
type buffers struct{ pool sync.Pool }

// maxPooled bounds the buffers kept for reuse, so one huge answer does not
// pin its memory.
const maxPooled = 1 << 20

func (b *buffers) get() []byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 4096)
}

func (b *buffers) put(buf []byte) {
	if cap(buf) <= maxPooled {
		b.pool.Put(&buf)
	}
}

// writeBody answers status with the JSON body fill appends, with its
// length, as writeJSON would.
func (s *Server) writeBody(w http.ResponseWriter, status int, fill func([]byte) []byte) {
	buf := fill(s.bufs.get())
	buf = append(buf, '\n') // as json.Encoder ends a value
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(buf)))
	w.WriteHeader(status)
	_, _ = w.Write(buf)
	s.bufs.put(buf)
}

// appendLink appends l as an apiwire.Link with its effective state at now
// (links.State): an active link past its expiry reads expired, as every
// edge answers it.
func (s *Server) appendLink(b []byte, l *links.Link, now time.Time) []byte {
	b = append(b, `{"code":`...)
	b = appendString(b, l.Code)
	b = append(b, `,"domain":`...)
	b = appendString(b, s.short.domainOf(l))
	b = append(b, `,"short_url":"`...)
	b = s.short.appendEscaped(b, l)
	b = append(b, '"')
	b = append(b, `,"url":`...)
	b = appendString(b, l.URL)
	b = append(b, `,"url_original":`...)
	b = appendString(b, l.URLOriginal)
	b = append(b, `,"redirect_type":`...)
	b = strconv.AppendInt(b, int64(l.RedirectType), 10)
	b = append(b, `,"status":`...)
	b = appendString(b, string(links.State(&l.Link, now)))
	b = append(b, `,"namespace":`...)
	b = appendString(b, l.Namespace)
	b = append(b, `,"expires_at":`...)
	if l.ExpiresAt.IsZero() {
		b = append(b, "null"...)
	} else {
		b = appendTime(b, l.ExpiresAt)
	}
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, l.Version, 10)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, l.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, l.UpdatedAt)
	b = append(b, `,"title":`...)
	if l.Title == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, l.Title)
	}
	b = append(b, `,"tags":[`...)
	for i, t := range l.Tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, t)
	}
	b = append(b, ']')
	b = appendExtras(b, l) // rules.go
	return append(b, '}')
}

// appendCreated appends a create's answer: the link as it was created, its
// state judged at its creation. A replay renders the same link, so it
// answers byte for byte what the original did, however long after.
func (s *Server) appendCreated(b []byte, l *links.Link) []byte {
	return s.appendLink(b, l, l.CreatedAt)
}

// appendBatch appends a batch create's answer, {"created", "failed",
// "results": [apiwire.BatchResult...]}: item i is problems[i] if that is
// set, else its link as created; created counts the links.
func (s *Server) appendBatch(b []byte, res links.BatchResult, problems []*apiwire.Problem, created int) []byte {
	b = append(b, `{"created":`...)
	b = strconv.AppendInt(b, int64(created), 10)
	b = append(b, `,"failed":`...)
	b = strconv.AppendInt(b, int64(len(res.Items)-created), 10)
	b = append(b, `,"results":[`...)
	for i, it := range res.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		if p := problems[i]; p != nil {
			b = append(b, `,"status":`...)
			b = strconv.AppendInt(b, int64(p.Status), 10)
			b = append(b, `,"error":`...)
			b = appendProblem(b, p)
		} else {
			b = append(b, `,"status":201,"link":`...)
			b = s.appendCreated(b, it.Link)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendList appends a page of links, {"links": [apiwire.Link...],
// "next_cursor": the cursor of next, or null when it is 0}.
func (s *Server) appendList(b []byte, ls []*links.Link, next uint64, now time.Time) []byte {
	b = append(b, `{"links":[`...)
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = s.appendLink(b, l, now)
	}
	b = append(b, `],"next_cursor":`...)
	if next == 0 {
		b = append(b, "null"...)
	} else {
		b = appendString(b, encodeCursor(next))
	}
	return append(b, '}')
}

// appendTime appends t in UTC as RFC 3339 with as many fractional digits
// as it needs, in quotes (no character of it needs escaping).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendProblem appends p as encoding/json writes an apiwire.Problem.
func appendProblem(b []byte, p *apiwire.Problem) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, p.Type)
	b = append(b, `,"title":`...)
	b = appendString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":`...)
		b = appendString(b, p.Detail)
	}
	if p.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendString(b, p.RequestID)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string exactly as encoding/json writes
// it: ", \ and control characters escaped (\b \f \n \r \t by name), and,
// for HTML safety, <, > and &, U+2028 and U+2029 as \u escapes; invalid
// UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

// appendEscaped is appendString without the quotes.
func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}
