package flashsale

import (
	"context"
	"encoding/json"
	"time"
)

// Order events for the payment service and the platform (issue 10): each
// state change of an order, and a sale selling out, is written as a
// Notice into the database's outbox in the same transaction as the change
// itself, so none is lost whatever fails after the commit; dispatchers
// then deliver the outbox in order, at least once, to each transport
// (webhooks, the RabbitMQ exchange). The Go type is Notice, not Event, so
// it does not read as a queue message; on the wire they are "events".

// NoticeType is an event's type on the wire (and its routing key).
type NoticeType string

// The event types.
const (
	NoticeOrderHeld      NoticeType = "order.held"
	NoticeOrderPaid      NoticeType = "order.paid"
	NoticeOrderExpired   NoticeType = "order.expired"
	NoticeOrderCancelled NoticeType = "order.cancelled"
	NoticeOrderFailed    NoticeType = "order.failed"
	NoticeSaleSoldOut    NoticeType = "sale.sold_out"
)

// Notice is one event in the outbox.
type Notice struct {
	// Seq is the outbox's order, assigned by the database: delivery
	// follows it, so one order's events arrive in the order they happened.
	Seq int64
	// ID is stable, for the receiver's de-duplication: "<order id>.<status>"
	// (an order reaches each status at most once), or for a sell-out
	// "<sale id>.sold_out.<order id>" naming the order that took the last room.
	ID      string
	Type    NoticeType
	SaleID  string
	OrderID string // the order's, or the last room's for sale.sold_out
	At      time.Time
	// Payload is the JSON body delivered, fixed when the change committed.
	Payload []byte
	// Test marks an event of a test sale; the dispatcher sets it from the
	// sale and the transports carry it as a header (it is not stored).
	Test bool
}

// noticeTypes maps an order's status to the event it makes.
var noticeTypes = map[OrderStatus]NoticeType{
	OrderHeld: NoticeOrderHeld, OrderPaid: NoticeOrderPaid, OrderExpired: NoticeOrderExpired,
	OrderCancelled: NoticeOrderCancelled, OrderFailed: NoticeOrderFailed,
}

// noticeBody is an event on the wire; the order is in its own JSON form
// (order.go), the one the API answers with.
type noticeBody struct {
	ID         string     `json:"id"`
	Type       NoticeType `json:"type"`
	OccurredAt time.Time  `json:"occurred_at"`
	SaleID     string     `json:"sale_id"`
	Order      *Order     `json:"order,omitempty"`
	OrderID    string     `json:"order_id,omitempty"` // sale.sold_out: the order that took the last room
}

// OrderNotice is the event of o having just reached o.Status at at. o must
// be the order as committed (CheckIn and Currency filled). Pending orders
// make none: they are not in the database.
func OrderNotice(o *Order, at time.Time) Notice {
	typ := noticeTypes[o.Status]
	n := Notice{ID: o.ID + "." + string(o.Status), Type: typ, SaleID: o.SaleID, OrderID: o.ID, At: at.UTC()}
	n.Payload = mustJSON(noticeBody{ID: n.ID, Type: typ, OccurredAt: n.At, SaleID: o.SaleID, Order: o})
	return n
}

// SoldOutNotice is the event of a sale's last room going to orderID at at
// (every night of the sale at zero available in the database).
func SoldOutNotice(saleID, orderID string, at time.Time) Notice {
	n := Notice{ID: saleID + ".sold_out." + orderID, Type: NoticeSaleSoldOut, SaleID: saleID, OrderID: orderID, At: at.UTC()}
	n.Payload = mustJSON(noticeBody{ID: n.ID, Type: n.Type, OccurredAt: n.At, SaleID: saleID, OrderID: orderID})
	return n
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("flashsale: notice payload: " + err.Error()) // only plain fields: cannot fail
	}
	return b
}

// Delivery is one attempt to deliver a notice over a transport, as the
// operators' delivery log shows it.
type Delivery struct {
	Transport string     `json:"transport"` // "webhook" or "amqp"
	NoticeID  string     `json:"event_id"`
	Seq       int64      `json:"seq"`
	Type      NoticeType `json:"type"`
	Attempt   int        `json:"attempt"` // 1 for the first try of this notice
	At        time.Time  `json:"at"`
	OK        bool       `json:"ok"`
	// Status is the receiver's HTTP status (webhook), 0 when none came.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Took is how long the attempt took.
	Took time.Duration `json:"took_ns"`
}

// MaxDeliveries is the most attempts one RecordDeliveries writes: ten
// times a dispatcher's batch, and within every store's limit of arguments
// to one statement.
const MaxDeliveries = 1000

// DeliveryQuery selects the delivery log, newest first.
type DeliveryQuery struct {
	Transport string // "": every transport
	NoticeID  string // "": every notice
	Failed    bool   // only failed attempts
	Limit     int
}

// NoticeSink delivers notices over one transport. Deliver returns nil only
// when the receiver has the notice (a 2xx, a publisher confirm); any error
// is retried, so a receiver sees a notice at least once.
type NoticeSink interface {
	// Name names the transport in the outbox's cursors and the log.
	Name() string
	// Deliver delivers one notice; status is the receiver's answer where
	// the transport has one (an HTTP status), for the log.
	Deliver(ctx context.Context, n Notice) (status int, err error)
}

// NoticeTransport is how far one transport's delivery is.
type NoticeTransport struct {
	Name   string `json:"transport"`
	Cursor int64  `json:"cursor"` // the last Seq delivered
	Last   int64  `json:"last"`   // the outbox's last Seq
	Behind int64  `json:"behind"` // notices not delivered yet
}
