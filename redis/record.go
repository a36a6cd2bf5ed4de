package redis

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// A reservation is stored as one field of the sale's :res hash, keyed by
// order ID, in a compact text form the Lua scripts can read without a JSON
// decoder:
//
//	<active 0|1>|<rooms>|<first>|<nights>|<amount>|<hold_unix_ns>|<len(user)>|<user><key>
//
// The user ID is length-prefixed and the idempotency key runs to the end, so
// neither needs escaping. The hold end keeps nanoseconds so a reservation
// reads back exactly as written. The scripts flip only the first byte.

// appendRecord appends everything after the active flag (the scripts add it).
func appendRecord(b []byte, r *flashsale.Reservation) []byte {
	var hold int64
	if !r.HoldExpiresAt.IsZero() {
		hold = r.HoldExpiresAt.UnixNano()
	}
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(r.Rooms), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(r.FirstNight), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(r.Nights), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, r.Amount, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, hold, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(len(r.UserID)), 10)
	b = append(b, '|')
	b = append(b, r.UserID...)
	b = append(b, r.IdempotencyKey...)
	return b
}

var errBadRecord = errors.New("malformed reservation record")

// parseRecord decodes a stored record (with its active flag).
func parseRecord(saleID, orderID, v string) (*flashsale.Reservation, error) {
	if len(v) < 2 || (v[0] != '0' && v[0] != '1' && v[0] != '2') || v[1] != '|' {
		return nil, errBadRecord
	}
	// '2' is active and pinned by a retake (see retake.lua).
	r := &flashsale.Reservation{OrderID: orderID, SaleID: saleID, Active: v[0] != '0'}
	rest := v[2:]
	var nums [6]int64
	for i := range nums {
		f, tail, ok := strings.Cut(rest, "|")
		if !ok {
			return nil, errBadRecord
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, errBadRecord
		}
		nums[i], rest = n, tail
	}
	ulen := int(nums[5])
	if ulen < 0 || ulen > len(rest) {
		return nil, errBadRecord
	}
	r.Rooms, r.FirstNight, r.Nights, r.Amount = int(nums[0]), int(nums[1]), int(nums[2]), nums[3]
	if nums[4] != 0 {
		r.HoldExpiresAt = time.Unix(0, nums[4])
	}
	r.UserID, r.IdempotencyKey = rest[:ulen], rest[ulen:]
	return r, nil
}
