//go:build race

package quant

// raceEnabled: the race detector slows tests ~10x; heavy tests sample.
const raceEnabled = true
