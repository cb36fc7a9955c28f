//go:build !race

package ff1

const raceEnabled = false
