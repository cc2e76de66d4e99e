//go:build !race

package envserver_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = false
