//go:build !race

package redirect

const raceEnabled = false
