package funnel_test

import (
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestMain counts this package's tests among the loads a timed test waits
// out (testenv.Alone).
func TestMain(m *testing.M) { testenv.Main(m) }
