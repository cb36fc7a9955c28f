//go:build !linux || race

package store

// Where mappings are not used (mem_mapped.go says why they are), blocks
// come from the Go heap and the garbage collector frees them.

func blockBytes[T any](_ *T, n int) []byte { return make([]byte, n) }

func blockWords[T any](_ *T, n int) []uint64 { return make([]uint64, n) }
