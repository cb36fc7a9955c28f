// Package snapshottest writes snapshot files the way control's builder does
// (entries plus a bloom of every code), for the edge's tests and the benchmarks,
// which may not import control.
package snapshottest

import (
	"bytes"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/snapshot"
)

// Build returns a snapshot file of links with header h (its Entries and
// BloomCount are set from links).
func Build(links []snapshot.Link, h snapshot.Header, sealed []snapshot.Sealed) ([]byte, error) {
	var w snapshot.Writer
	f := bloom.NewWithEstimates(uint(max(len(links), 1000)), 0.01)
	for _, l := range links {
		if err := w.Add(l); err != nil {
			return nil, err
		}
		f.AddString(l.Code)
	}
	var bb bytes.Buffer
	if _, err := f.WriteTo(&bb); err != nil {
		return nil, err
	}
	h.BloomCount = uint64(len(links))
	var out bytes.Buffer
	if err := w.Write(&out, h, sealed, bb.Bytes()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
