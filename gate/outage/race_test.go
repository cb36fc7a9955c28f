//go:build race

package outage

const raceEnabled = true
