package http_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestMain counts this package's tests among the loads a timed test waits
// out (testenv.Alone), and fails the package if any goroutine it started
// (a broadcaster, a stream, an audit the operators' stream began) is still
// running once every test is done.
func TestMain(m *testing.M) {
	testenv.Share()
	goleak.VerifyTestMain(m)
}
