//go:build linux && !race

package store

import (
	"runtime"
	"syscall"
	"unsafe"
)

// The overlay's arena chunks and index tables live outside the Go heap: the
// garbage collector paces itself by the heap it finds live, so a heap that
// held the overlay's bytes would let as much garbage again (the decoded
// stream) pile up before each collection, and a bulk load would cost twice
// its size in resident memory. Mapped, only the pages written count, and a
// block is unmapped by the garbage collector's cleanup of its owner, once
// nothing (an index, a Record) reaches it. Under the race detector the
// blocks come from the heap instead (mem_heap.go), so that it sees every
// access.

// mapMin is the smallest block worth a mapping of its own; smaller ones
// come from the heap, where they cost less than a page.
const mapMin = 16 << 10

// blockBytes returns n zero bytes that stay valid while owner is reachable.
func blockBytes[T any](owner *T, n int) []byte {
	if n < mapMin {
		return make([]byte, n)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		// Out of mappings or address space: the heap may still have room,
		// and fails loudly if not.
		return make([]byte, n)
	}
	// b is not a pointer into the Go heap, so the cleanup's argument does
	// not keep owner reachable.
	runtime.AddCleanup(owner, func(b []byte) { _ = syscall.Munmap(b) }, b)
	return b
}

// blockWords is blockBytes for n 64-bit words, aligned for atomic access.
func blockWords[T any](owner *T, n int) []uint64 {
	if n*8 < mapMin {
		return make([]uint64, n)
	}
	b := blockBytes(owner, n*8)
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
