package http

import (
	"net/http"

	"github.com/flashsale/flashsale"
)

// demoPaymentPrefix starts the payment_ref of an order paid by the demo,
// so the books tell a demo payment from a real one.
const demoPaymentPrefix = "demo-"

// errDemoNotHeld refuses to pay an order that is not held, or whose hold
// has run out: the demo pays a live hold and nothing else (an expired one
// is not taken again).
var errDemoNotHeld = flashsale.Errorf(flashsale.EConflict, "only a held order can be paid in the demo")

// handleDemoPay pays the caller's own held order as the payment platform
// would, with payment_ref "demo-<order id>", so the sale page can show the
// whole purchase without a payment platform. It is registered only in demo
// mode. The user is authenticated like every user route; someone else's
// order is 404, as the order read answers it. It reads nothing but the
// path and the token: any body is ignored.
func (s *Server) handleDemoPay(w http.ResponseWriter, r *http.Request) {
	u, id, ok := s.userAndID(w, r)
	if !ok {
		return
	}
	o, err := s.svc.Order(r.Context(), u, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A hold whose window has passed is not paid either, though the
	// reaper may not have released it yet.
	if o.Status != flashsale.OrderHeld || !s.now().Before(o.HoldExpiresAt) {
		s.writeError(w, r, errDemoNotHeld)
		return
	}
	// The hold may end in the instant between this check and the payment;
	// MarkPaid then takes the rooms again if they are free, as a late real
	// payment would.
	o, err = s.svc.MarkPaid(r.Context(), o.ID, demoPaymentPrefix+o.ID)
	s.writeOrder(w, r, o, err)
}
