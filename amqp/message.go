package amqp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The message body is a compact binary encoding of a reservation, about a
// hundred bytes, instead of JSON: at tens of thousands of orders a second the
// broker writes every byte to disk on each quorum member, and a fixed field
// order needs no keys. The first byte is a version so the format can change
// while old messages are still queued.
//
//	version  byte (messageVersion)
//	flags    byte (bit 0: active)
//	order_id, sale_id, user_id, idempotency_key  uvarint length + bytes each
//	first_night, nights, rooms                   uvarint each
//	amount                                       varint
//	hold_expires_at                              varint Unix seconds, uvarint nanoseconds
const messageVersion = 1

const (
	flagActive = 1 << 0
	// maxField bounds each string so a corrupt length cannot make the
	// decoder allocate much; IDs and keys are far shorter.
	maxField = 256
	// maxMessage bounds a whole body for the same reason.
	maxMessage = 4*maxField + 64
)

// errMessage marks a body that cannot be a reservation: a consumer
// dead-letters it without retrying.
var errMessage = errors.New("malformed reservation message")

// appendReservation appends r's encoding to b. It fails only for a
// reservation the decoder would refuse, so nothing undecodable is published.
func appendReservation(b []byte, r *flashsale.Reservation) ([]byte, error) {
	if err := checkReservation(r); err != nil {
		return b, err
	}
	var flags byte
	if r.Active {
		flags |= flagActive
	}
	b = append(b, messageVersion, flags)
	for _, s := range [...]string{r.OrderID, r.SaleID, r.UserID, r.IdempotencyKey} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(r.FirstNight))
	b = binary.AppendUvarint(b, uint64(r.Nights))
	b = binary.AppendUvarint(b, uint64(r.Rooms))
	b = binary.AppendVarint(b, r.Amount)
	b = binary.AppendVarint(b, r.HoldExpiresAt.Unix())
	b = binary.AppendUvarint(b, uint64(r.HoldExpiresAt.Nanosecond()))
	return b, nil
}

// decodeReservation is the inverse of appendReservation. The body comes from
// the network, so every length and number is checked; a failure wraps
// errMessage.
func decodeReservation(b []byte) (flashsale.Reservation, error) {
	var r flashsale.Reservation
	if len(b) > maxMessage {
		return r, fmt.Errorf("%w: %d bytes", errMessage, len(b))
	}
	if len(b) < 2 || b[0] != messageVersion {
		return r, fmt.Errorf("%w: unknown version", errMessage)
	}
	r.Active = b[1]&flagActive != 0
	d := decoder{b: b[2:]}
	r.OrderID = d.string()
	r.SaleID = d.string()
	r.UserID = d.string()
	r.IdempotencyKey = d.string()
	r.FirstNight = d.int()
	r.Nights = d.int()
	r.Rooms = d.int()
	r.Amount = d.varint()
	sec := d.varint()
	nsec := d.uvarint()
	switch {
	case d.err != nil:
		return flashsale.Reservation{}, d.err
	case len(d.b) != 0:
		return flashsale.Reservation{}, fmt.Errorf("%w: %d trailing bytes", errMessage, len(d.b))
	case nsec >= uint64(time.Second):
		return flashsale.Reservation{}, fmt.Errorf("%w: nanoseconds out of range", errMessage)
	}
	r.HoldExpiresAt = time.Unix(sec, int64(nsec)).UTC()
	if err := checkReservation(&r); err != nil {
		return flashsale.Reservation{}, err
	}
	return r, nil
}

// checkReservation holds the bounds both ends agree on.
func checkReservation(r *flashsale.Reservation) error {
	switch {
	case r.OrderID == "" || r.SaleID == "" || r.UserID == "":
		return fmt.Errorf("%w: order, sale and user IDs are required", errMessage)
	case len(r.OrderID) > maxField || len(r.SaleID) > maxField || len(r.UserID) > maxField || len(r.IdempotencyKey) > maxField:
		return fmt.Errorf("%w: an ID or key is longer than %d bytes", errMessage, maxField)
	case r.FirstNight < 0 || r.FirstNight >= flashsale.MaxNights:
		return fmt.Errorf("%w: first night %d out of range", errMessage, r.FirstNight)
	case r.Nights < 1 || r.Nights > flashsale.MaxNights:
		return fmt.Errorf("%w: nights %d out of range", errMessage, r.Nights)
	case r.Rooms < 1 || r.Rooms > flashsale.MaxStock:
		return fmt.Errorf("%w: rooms %d out of range", errMessage, r.Rooms)
	case r.Amount < 0:
		return fmt.Errorf("%w: negative amount", errMessage)
	}
	return nil
}

// decoder reads fields in order and remembers the first error, so
// decodeReservation reads like the format instead of a ladder of checks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad unsigned number", errMessage)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad number", errMessage)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a uvarint that must fit the reservation's small counts; the
// range checks in checkReservation then apply.
func (d *decoder) int() int {
	v := d.uvarint()
	if v > 1<<31 {
		if d.err == nil {
			d.err = fmt.Errorf("%w: number out of range", errMessage)
		}
		return 0
	}
	return int(v)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > maxField || n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: string length %d out of range", errMessage, n)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// requestIDHeader carries the purchase's request id beside the body, whose
// format stays as it is, so the consumer's lines about the order name it.
const requestIDHeader = "x-request-id"

// requestHeaders are a message's headers: the request id when ctx has one.
// The relay republishes without one.
func requestHeaders(ctx context.Context) amqp091.Table {
	if id := flashsale.RequestID(ctx); id != "" {
		return amqp091.Table{requestIDHeader: id}
	}
	return nil
}

// deliveryRequestID is the request id a delivery carries, or "".
func deliveryRequestID(h amqp091.Table) string {
	id, _ := h[requestIDHeader].(string)
	return id
}
