package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale"
)

// callOutcomes are the outcomes of a call to the stock engine or the
// database: it did it; it answered no (a conditional update's guard, a
// duplicate, a not found); the deadline passed; anything else.
var callOutcomes = [...]string{"ok", "refused", "timeout", "error"}

const (
	callOK = iota
	callRefused
	callTimeout
	callError
)

func callOutcome(err error) int {
	switch {
	case err == nil:
		return callOK
	case errors.Is(err, context.DeadlineExceeded):
		return callTimeout
	case flashsale.Unreachable(err) || flashsale.ErrorCode(err) == flashsale.EInternal:
		return callError
	}
	return callRefused
}

// call is one operation's latency histogram and outcome counters,
// resolved once.
type call struct {
	dur      prometheus.Observer
	outcomes [len(callOutcomes)]prometheus.Counter
}

func newCall(dur *prometheus.HistogramVec, calls *prometheus.CounterVec, op string) *call {
	c := &call{dur: dur.WithLabelValues(op)}
	for i, o := range callOutcomes {
		c.outcomes[i] = calls.WithLabelValues(op, o)
	}
	return c
}

// done records a call that began at start and returned err.
func (c *call) done(start time.Time, err error) {
	c.dur.Observe(time.Since(start).Seconds())
	c.outcomes[callOutcome(err)].Inc()
}
