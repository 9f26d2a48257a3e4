//go:build race

package server

// raceEnabled: the race detector doubles the stack guard and grows frames.
const raceEnabled = true
