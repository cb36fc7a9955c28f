//go:build race

package stack

// raceEnabled says this binary was built with -race: children built for it
// get the race detector too.
const raceEnabled = true
