package inmem_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/limittest"
)

func TestMain(m *testing.M) {
	testenv.Share() // its storms are loads a timed test waits out (testenv.Alone)
	goleak.VerifyTestMain(m)
}

func TestLimiter(t *testing.T) {
	limittest.Run(t, func(tb testing.TB) flashsale.Limiter {
		l := inmem.NewLimiter()
		tb.Cleanup(func() { l.Close() })
		return l
	})
}
