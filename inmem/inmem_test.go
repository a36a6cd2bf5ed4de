package inmem_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/limittest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLimiter(t *testing.T) {
	limittest.Run(t, func(tb testing.TB) flashsale.Limiter {
		l := inmem.NewLimiter()
		tb.Cleanup(func() { l.Close() })
		return l
	})
}
