package http

import (
	"net/http"
	"strconv"

	"github.com/flashsale/flashsale"
)

// The operators' view of the order events' delivery: how far each
// transport is, and the log of every attempt.

type noticeStatusJSON struct {
	Transports []flashsale.NoticeTransport `json:"transports"`
}

func (s *Server) handleNoticeStatus(w http.ResponseWriter, r *http.Request) {
	ts, err := s.svc.NoticeStatus(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if ts == nil {
		ts = []flashsale.NoticeTransport{}
	}
	writeJSON(w, http.StatusOK, noticeStatusJSON{Transports: ts})
}

type deliveriesJSON struct {
	Deliveries []flashsale.Delivery `json:"deliveries"`
}

var noticeTransports = []string{"webhook", "amqp"}

func (s *Server) handleDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	transport, err := oneOf("transport", q.Get("transport"), noticeTransports)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := q.Get("event_id")
	if id != "" && !printableASCII(id, 2*maxIDLen) {
		s.writeError(w, r, flashsale.Errorf(flashsale.EInvalid, "event_id must be an event's id"))
		return
	}
	var failed bool
	if v := q.Get("failed"); v != "" {
		if failed, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, flashsale.Errorf(flashsale.EInvalid, "failed must be true or false"))
			return
		}
	}
	limit, cursor, err := pageQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if cursor != "" {
		s.writeError(w, r, flashsale.Errorf(flashsale.EInvalid, "the delivery log has no cursor: narrow it with transport, event_id or failed"))
		return
	}
	ds, err := s.svc.Deliveries(r.Context(), flashsale.DeliveryQuery{Transport: transport, NoticeID: id, Failed: failed, Limit: limit})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if ds == nil {
		ds = []flashsale.Delivery{}
	}
	writeJSON(w, http.StatusOK, deliveriesJSON{Deliveries: ds})
}
