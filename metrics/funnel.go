package metrics

import (
	"errors"
	"time"

	"github.com/flashsale/flashsale"
)

// outcomes are the purchase outcomes: "ok" (an order, held or pending),
// every code a purchase can be refused with, and the two kinds of
// unavailable an operator tells apart (shed at once; outcome unknown).
var outcomes = [...]string{
	"ok",
	flashsale.ESoldOut, flashsale.ERateLimited, flashsale.ELimitExceeded, flashsale.ETokenInvalid,
	flashsale.ENotEligible, flashsale.ENotStarted, flashsale.EEnded, flashsale.ENotFound,
	flashsale.EInvalid, flashsale.EConflict, flashsale.EUnauthenticated, flashsale.EForbidden,
	flashsale.EUnavailable, "overloaded", "indeterminate", flashsale.EInternal,
}

// outcomeIndex maps a code to its place in outcomes; codes a purchase
// cannot return count as internal.
var outcomeIndex = func() map[string]int {
	m := make(map[string]int, len(outcomes))
	for i, o := range outcomes {
		m[o] = i
	}
	return m
}()

// The outcomes outcomeOf picks without the code's lookup.
var (
	outcomeOK            = outcomeIndex["ok"]
	outcomeUnavailable   = outcomeIndex[flashsale.EUnavailable]
	outcomeOverloaded    = outcomeIndex["overloaded"]
	outcomeIndeterminate = outcomeIndex["indeterminate"]
	outcomeInternal      = outcomeIndex[flashsale.EInternal]
)

// outcomeOf is the outcome of a purchase that returned err. It allocates
// nothing: ErrorCode finds the *Error without copying, and errors.Is
// compares sentinels.
func outcomeOf(err error) int {
	if err == nil {
		return outcomeOK
	}
	code := flashsale.ErrorCode(err)
	if code == flashsale.EUnavailable {
		switch {
		case errors.Is(err, flashsale.ErrOverloaded):
			return outcomeOverloaded
		case errors.Is(err, flashsale.ErrIndeterminate):
			return outcomeIndeterminate
		}
		return outcomeUnavailable
	}
	if i, ok := outcomeIndex[code]; ok {
		return i
	}
	return outcomeInternal
}

// The funnel's steps, in order; paid is counted by the Store wrapper
// (the transition to paid), since payment is not a purchase's step.
const (
	stepRequested = iota
	stepAdmitted
	stepReserved
	stepWritten
	stepPaid
	numSteps
)

var stepNames = [numSteps]string{"requested", "admitted", "reserved", "written", "paid"}

// Funnel is the funnel.Observer the metrics implement (see funnel's
// Observer for when each is called).
func (m *Metrics) Funnel() *FunnelObserver { return (*FunnelObserver)(m) }

// FunnelObserver implements funnel.Observer.
type FunnelObserver Metrics

func (o *FunnelObserver) m() *Metrics { return (*Metrics)(o) }

// Sale tracks a sale the funnel knows, up to the cap.
func (o *FunnelObserver) Sale(s *flashsale.Sale) { o.m().track(s.ID, s.EndsAt, s.Test) }

// Purchase counts one purchase's answer.
func (o *FunnelObserver) Purchase(saleID string, err error) {
	s := o.m().sale(saleID)
	s.steps[stepRequested].Inc()
	s.outcomes[outcomeOf(err)].Inc()
}

// Admitted counts a purchase past the rate limits and admission.
func (o *FunnelObserver) Admitted(saleID string) { o.m().sale(saleID).steps[stepAdmitted].Inc() }

// Reserved counts a purchase the stock engine took units for.
func (o *FunnelObserver) Reserved(saleID string) { o.m().sale(saleID).steps[stepReserved].Inc() }

// Written counts a purchase the order path accepted (a held row, or a
// confirmed publish).
func (o *FunnelObserver) Written(saleID string) { o.m().sale(saleID).steps[stepWritten].Inc() }

// HoldReleased counts an expired hold whose units are back, late after
// its end.
func (o *FunnelObserver) HoldReleased(saleID string, late time.Duration) {
	m := o.m()
	m.sale(saleID).expiries.Inc()
	m.releaseDelay.Observe(max(late, 0).Seconds())
}

// Audited records a scheduled audit: found findings before repair, left
// after; err when it could not run.
func (o *FunnelObserver) Audited(saleID string, found, left int, err error) {
	m := o.m()
	switch {
	case err != nil:
		m.audits.WithLabelValues("error").Inc()
		return
	case found == 0:
		m.audits.WithLabelValues("balanced").Inc()
	default:
		m.audits.WithLabelValues("drift").Inc()
	}
	label := m.sale(saleID).label
	m.auditFound.WithLabelValues(label).Set(float64(found))
	m.auditLeft.WithLabelValues(label).Set(float64(left))
}
