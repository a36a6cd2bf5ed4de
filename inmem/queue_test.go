package inmem_test

import (
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/queuetest"
)

func TestQueue(t *testing.T) {
	queuetest.Run(t, func(testing.TB) flashsale.Queue { return inmem.NewQueue() })
}
