//go:build !race

package unlock

const raceEnabled = false
