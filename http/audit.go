package http

import (
	"context"
	"net/http"
	"time"

	"github.com/flashsale/flashsale"
)

// auditTimeout bounds an audit or a repair. It replaces the request
// deadline, which is sized for a purchase: an audit reads a whole sale
// twice, and a repair may rebuild the sale, draining the order queue
// first. It stays under the HTTP server's write timeout.
const auditTimeout = 25 * time.Second

// auditJSON is an audit report on the wire.
type auditJSON struct {
	SaleID   string    `json:"sale_id"`
	At       time.Time `json:"at"`
	Balanced bool      `json:"balanced"`
	// Engine says whether the stock engine's view was compared; when it
	// was not, the nights carry no engine figures.
	Engine   bool               `json:"engine_compared"`
	Nights   []auditNightJSON   `json:"nights"`
	Findings []auditFindingJSON `json:"findings"`
	Repairs  []repairStepJSON   `json:"repairs,omitempty"`
}

type auditNightJSON struct {
	Date            string `json:"date"`
	Stock           int    `json:"stock"`
	Held            int    `json:"held"`
	Sold            int    `json:"sold"`
	EngineAvailable *int   `json:"engine_available,omitempty"`
	InFlight        *int   `json:"in_flight,omitempty"`
	Drift           *int   `json:"drift,omitempty"`
}

type auditFindingJSON struct {
	Kind    flashsale.FindingKind `json:"kind"`
	Night   string                `json:"night,omitempty"`
	OrderID string                `json:"order_id,omitempty"`
	UserID  string                `json:"user_id,omitempty"`
	Detail  string                `json:"detail"`
}

type repairStepJSON struct {
	Action  flashsale.RepairAction `json:"action"`
	OrderID string                 `json:"order_id,omitempty"`
	OK      bool                   `json:"ok"`
	// Error is the cause in full: the audit is the operator's tool, and
	// "internal error" would not say what to do.
	Error string `json:"error,omitempty"`
}

func auditView(a *flashsale.Audit) auditJSON {
	out := auditJSON{
		SaleID: a.SaleID, At: a.At, Balanced: a.Balanced(), Engine: a.Engine,
		Nights:   make([]auditNightJSON, len(a.Nights)),
		Findings: make([]auditFindingJSON, len(a.Findings)),
	}
	for i, n := range a.Nights {
		out.Nights[i] = auditNightJSON{Date: n.Date, Stock: n.Stock, Held: n.Held, Sold: n.Sold}
		if a.Engine {
			avail, inFlight, drift := n.EngineAvailable, n.InFlight, n.Drift()
			out.Nights[i].EngineAvailable, out.Nights[i].InFlight, out.Nights[i].Drift = &avail, &inFlight, &drift
		}
	}
	for i, f := range a.Findings {
		out.Findings[i] = auditFindingJSON{Kind: f.Kind, Night: f.Night, OrderID: f.OrderID, UserID: f.UserID, Detail: f.Detail}
	}
	for _, st := range a.Repairs {
		j := repairStepJSON{Action: st.Action, OrderID: st.OrderID, OK: st.Err == nil}
		if st.Err != nil {
			j.Error = st.Err.Error()
		}
		out.Repairs = append(out.Repairs, j)
	}
	return out
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	s.serveAudit(w, r, s.svc.Audit)
}

func (s *Server) handleRepairAudit(w http.ResponseWriter, r *http.Request) {
	s.serveAudit(w, r, s.svc.Repair)
}

// serveAudit runs an audit or a repair under auditTimeout. A repair the
// client stops waiting for still finishes: each of its steps is
// idempotent, and stopping between a step and its recheck helps no one.
func (s *Server) serveAudit(w http.ResponseWriter, r *http.Request, run func(context.Context, string) (*flashsale.Audit, error)) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	a, err := run(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, auditView(a))
}
