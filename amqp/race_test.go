//go:build race

package amqp

// raceEnabled shrinks the SQLite end-to-end test: the pure-Go SQLite
// driver runs about ten times slower under the race detector.
const raceEnabled = true
