//go:build race

package rollout

// raceDetector: the tests run under the race detector (make test's second pass).
const raceDetector = true
