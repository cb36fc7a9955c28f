//go:build !race

package outage

const raceEnabled = false
