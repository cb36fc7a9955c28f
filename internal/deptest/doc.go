// Package deptest holds the test that keeps the architecture's import
// rules: which packages may import which. It has no code of its own.
package deptest
