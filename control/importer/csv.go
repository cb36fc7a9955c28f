package importer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// csvLines splits CSV text (RFC 4180: quoted fields with "" escapes may
// span lines) into records without ever losing a good row to a bad one: a
// quoted field left open is reported as a bad record at its first line and
// reading resumes at the line after it, and a physical line longer than the
// record limit is reported and skipped without holding it in memory.
type csvLines struct {
	br      *bufio.Reader
	line    int // physical lines read from br
	pending []physLine
	max     int
	comma   byte
	read    int64 // bytes consumed from br
	// taken are the lines after the first of the last record (a quoted
	// field spanning lines); giveBack re-reads them as records.
	taken []physLine
}

// giveBack is for a record that spanned lines and turned out malformed:
// its quote most likely swallowed the lines after it, which are then read
// again as records of their own.
func (c *csvLines) giveBack() {
	c.pending = append(c.taken, c.pending...)
	c.taken = nil
}

type physLine struct {
	n       int
	text    string
	tooLong bool
}

func newCSVLines(r io.Reader, max int) *csvLines {
	return &csvLines{br: bufio.NewReaderSize(r, 64<<10), max: max, comma: ','}
}

// errRecord is a malformed record: reported, skipped, never fatal.
type errRecord struct {
	line int
	msg  string
}

func (e *errRecord) Error() string { return e.msg }

// physical returns the next line without its "\n" (and a "\r" before it).
func (c *csvLines) physical() (physLine, error) {
	if len(c.pending) > 0 {
		l := c.pending[0]
		c.pending = c.pending[1:]
		return l, nil
	}
	var buf []byte
	tooLong := false
	for {
		chunk, err := c.br.ReadSlice('\n')
		c.read += int64(len(chunk))
		if !tooLong {
			if len(buf)+len(chunk) > c.max+2 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return physLine{}, err
		}
		if errors.Is(err, io.EOF) && len(chunk) == 0 && len(buf) == 0 && !tooLong {
			return physLine{}, io.EOF
		}
		c.line++
		n := len(buf)
		if n > 0 && buf[n-1] == '\n' {
			n--
		}
		if n > 0 && buf[n-1] == '\r' {
			n--
		}
		return physLine{n: c.line, text: string(buf[:n]), tooLong: tooLong}, nil
	}
}

// record returns the next non-blank record's fields and the line it starts
// on. A malformed record is returned as an *errRecord (skip it and call
// again); io.EOF ends the input; other errors are the reader's.
func (c *csvLines) record() ([]string, int, error) {
	for {
		first, err := c.physical()
		if err != nil {
			return nil, 0, err
		}
		if first.tooLong {
			return nil, first.n, &errRecord{first.n, fmt.Sprintf("row longer than %d bytes", c.max)}
		}
		if first.text == "" {
			continue
		}
		c.taken = nil
		var taken []physLine
		text := first.text
		if open := openQuote(first.text, false, c.comma); open {
			// A quoted field over several lines: scan each new line from
			// the state the last one ended in, and bound the span, so a
			// quote left open costs at most maxSpanBytes of reading per
			// line however hostile the file.
			buf := []byte(first.text)
			for open {
				next, err := c.physical()
				if err != nil && !errors.Is(err, io.EOF) {
					return nil, 0, err
				}
				if err != nil || next.tooLong || len(taken) == maxSpanLines || len(buf)+1+len(next.text) > maxSpanBytes {
					// Give back what the open quote swallowed: those
					// lines are records of their own.
					if err == nil {
						taken = append(taken, next)
					}
					c.pending = append(taken, c.pending...)
					return nil, first.n, &errRecord{first.n, "quoted field is never closed"}
				}
				taken = append(taken, next)
				buf = append(append(buf, '\n'), next.text...)
				open = openQuote(next.text, true, c.comma)
			}
			text = string(buf)
		}
		c.taken = taken
		fields, err := splitCSV(text, c.comma)
		if err != nil {
			c.giveBack()
			return nil, first.n, &errRecord{first.n, err.Error()}
		}
		return fields, first.n, nil
	}
}

// A quoted field may span at most maxSpanLines more lines and maxSpanBytes
// in all: exports put newlines in titles, not pages of text.
const (
	maxSpanLines = 64
	maxSpanBytes = 64 << 10
)

// openQuote reports whether text ends inside a quoted field, when it starts
// inside one (inQuote) or at the start of a record.
func openQuote(text string, inQuote bool, comma byte) bool {
	atStart := !inQuote
	for i := 0; i < len(text); i++ {
		ch := text[i]
		switch {
		case inQuote:
			if ch == '"' {
				if i+1 < len(text) && text[i+1] == '"' {
					i++
				} else {
					inQuote = false
				}
			}
		case ch == comma:
			atStart = true
			continue
		case ch == '"' && atStart:
			inQuote = true
		}
		atStart = false
	}
	return inQuote
}

// splitCSV splits one complete record. Quotes count only at the start of a
// field (a quote inside an unquoted field is kept as is); after a closing
// quote only the separator or the end may follow.
func splitCSV(text string, comma byte) ([]string, error) {
	var fields []string
	var field []byte
	i := 0
	for {
		field = field[:0]
		if i < len(text) && text[i] == '"' {
			i++
			for {
				if i >= len(text) {
					return nil, errors.New("quoted field is never closed")
				}
				if text[i] == '"' {
					if i+1 < len(text) && text[i+1] == '"' {
						field = append(field, '"')
						i += 2
						continue
					}
					i++
					break
				}
				field = append(field, text[i])
				i++
			}
			if i < len(text) && text[i] != comma {
				return nil, fmt.Errorf("unexpected %q after a closing quote in field %d", text[i], len(fields)+1)
			}
		} else {
			for i < len(text) && text[i] != comma {
				field = append(field, text[i])
				i++
			}
		}
		fields = append(fields, string(field))
		if i >= len(text) {
			return fields, nil
		}
		i++ // the separator
	}
}

// sniffComma picks the separator of a header line: the one of ',', ';' and
// tab that splits it into the most fields (spreadsheets in some locales
// write ';').
func sniffComma(header string) byte {
	best, bestN := byte(','), 0
	for _, c := range []byte{',', ';', '\t'} {
		if f, err := splitCSV(header, c); err == nil && len(f) > bestN {
			best, bestN = c, len(f)
		}
	}
	return best
}
