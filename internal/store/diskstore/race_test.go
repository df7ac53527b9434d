//go:build race

package diskstore

// raceEnabled scales load tests down under the race detector, which makes
// Pebble several times slower.
const raceEnabled = true
