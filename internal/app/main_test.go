package app

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test left a goroutine running (a
// server, a signal handler, a fetch of a draw) once every test is done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
