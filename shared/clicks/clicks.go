// Package clicks is the click event edges publish and the consumer (a later
// issue) rolls up per link per day: stream names and a compact batch
// encoding.
//
// Clicks are at-most-once by design: the edge records them off the response
// path, and a full buffer or an unreachable NATS drops them (counted) rather
// than slow a redirect down.
package clicks

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/edgelink/edgelink/shared/link"
)

const (
	// Stream is the JetStream stream holding click batches.
	Stream = "CLICKS"
	// SubjectPrefix starts every click subject; an edge publishes on
	// SubjectPrefix + its name, so a consumer can tell edges apart.
	SubjectPrefix = "clicks."
	// Subjects is the stream's subject filter.
	Subjects = SubjectPrefix + ">"
)

// Subject is the subject edge publishes its batches on.
func Subject(edge string) string { return SubjectPrefix + edge }

// Click is one redirect served.
type Click struct {
	Code string
	At   int64 // Unix milliseconds
}

const format byte = 1

var errInvalid = errors.New("clicks: invalid batch")

// AppendHeader starts a batch of n clicks in dst.
func AppendHeader(dst []byte, n int) []byte {
	dst = append(dst, format)
	return binary.AppendUvarint(dst, uint64(n))
}

// AppendClick appends one click of a batch: varint time, code length, code.
// It allocates only when dst must grow.
func AppendClick(dst []byte, code []byte, at int64) []byte {
	dst = binary.AppendVarint(dst, at)
	dst = append(dst, byte(len(code)))
	return append(dst, code...)
}

// Decode returns the clicks of a batch, validating every code.
func Decode(b []byte) ([]Click, error) {
	if len(b) < 2 || b[0] != format {
		return nil, fmt.Errorf("%w: bad header", errInvalid)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: count", errInvalid)
	}
	b = b[1+k:]
	out := make([]Click, 0, n)
	for range n {
		at, k := binary.Varint(b)
		if k <= 0 || len(b) < k+1 {
			return nil, fmt.Errorf("%w: truncated", errInvalid)
		}
		cl := int(b[k])
		b = b[k+1:]
		if len(b) < cl || !link.ValidCodeSyntax(b[:cl]) {
			return nil, fmt.Errorf("%w: code", errInvalid)
		}
		out = append(out, Click{Code: string(b[:cl]), At: at})
		b = b[cl:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errInvalid)
	}
	return out, nil
}
