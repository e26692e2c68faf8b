//go:build race

package serve

// raceEnabled: the test binary is built with the race detector, which
// slows the engine ~10x; requiredRuns samples fewer seeds under it.
const raceEnabled = true
