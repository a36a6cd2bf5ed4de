package funnel

import (
	"time"

	"github.com/flashsale/flashsale"
)

// Observer is told what the funnel does, for metrics. Its calls come from
// the purchase path: an implementation must neither block nor allocate.
// The zero Config observes nothing.
type Observer interface {
	// Sale is a sale the funnel knows (created, loaded or read): only
	// these IDs are known sales in the calls below, so an observer that
	// keeps a series per sale is never made to keep a guessed one.
	Sale(sale *flashsale.Sale)
	// Purchase is one purchase's answer: nil is an order (held or
	// pending). saleID is the request's, perhaps a sale that does not
	// exist: only Sale's IDs are known sales.
	Purchase(saleID string, err error)
	// Admitted, Reserved and Written are a purchase passing the rate
	// limits and admission, the stock engine's reserve, and the order
	// path's write.
	Admitted(saleID string)
	Reserved(saleID string)
	Written(saleID string)
	// HoldReleased is an expired hold whose units are back in the engine,
	// late after the hold ended.
	HoldReleased(saleID string, late time.Duration)
	// Audited is one scheduled audit: found findings, left after the
	// repair; err when it could not run.
	Audited(saleID string, found, left int, err error)
}

type nopObserver struct{}

func (nopObserver) Sale(*flashsale.Sale)               {}
func (nopObserver) Purchase(string, error)             {}
func (nopObserver) Admitted(string)                    {}
func (nopObserver) Reserved(string)                    {}
func (nopObserver) Written(string)                     {}
func (nopObserver) HoldReleased(string, time.Duration) {}
func (nopObserver) Audited(string, int, int, error)    {}
