package redis

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
)

// The outbox closes the gap between Redis and the broker in the distributed
// shape: reserve.lua adds every new order to the sale's :unconfirmed sorted
// set (scored by reserve time) in the same atomic step as the deduction;
// Confirm removes it once RabbitMQ has confirmed the publish. An order
// still there after a while was reserved by a process that died before
// its publish was confirmed, and a relay republishes it (the consumer's
// unique order ID makes a second delivery harmless). Release also removes
// the order: a released reservation must never be republished.

// Confirm records that the broker confirmed the publish of an order.
func (e *Engine) Confirm(ctx context.Context, saleID, orderID string) error {
	if err := e.client.ZRem(ctx, e.saleKeys(saleID).unconfirmed, orderID).Err(); err != nil {
		return unavailable("confirm: sale="+saleID+" order="+orderID, err)
	}
	return nil
}

// Unconfirmed returns up to limit active reservations recorded at or before
// olderThan whose publish was never confirmed, oldest first, across every
// sale this prefix has loaded (the sales set, never KEYS or SCAN).
func (e *Engine) Unconfirmed(ctx context.Context, olderThan time.Time, limit int) ([]flashsale.Reservation, error) {
	if limit <= 0 {
		return nil, nil
	}
	sales, err := e.sales(ctx)
	if err != nil {
		return nil, unavailable("unconfirmed", err)
	}
	if len(sales) == 0 {
		return nil, nil
	}
	by := &goredis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(olderThan.UnixMilli(), 10), Count: int64(limit)}
	ranges := make([]*goredis.ZSliceCmd, len(sales))
	if _, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, s := range sales {
			ranges[i] = p.ZRangeByScoreWithScores(ctx, e.saleKeys(s).unconfirmed, by)
		}
		return nil
	}); err != nil {
		return nil, unavailable("unconfirmed", err)
	}
	type pending struct {
		sale, order string
		at          float64
	}
	var ps []pending
	for i, c := range ranges {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			ps = append(ps, pending{sales[i], id, z.Score})
		}
	}
	slices.SortFunc(ps, func(a, b pending) int { return cmp.Compare(a.at, b.at) })
	ps = ps[:min(len(ps), limit)]
	if len(ps) == 0 {
		return nil, nil
	}
	recs := make([]*goredis.StringCmd, len(ps))
	if _, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, x := range ps {
			recs[i] = p.HGet(ctx, e.saleKeys(x.sale).res, x.order)
		}
		return nil
	}); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, unavailable("unconfirmed", err)
	}
	out := make([]flashsale.Reservation, 0, len(ps))
	for i, x := range ps {
		v, err := recs[i].Result()
		if err != nil {
			continue // the record expired or the sale was reloaded
		}
		r, err := parseRecord(x.sale, x.order, v)
		if err != nil {
			e.logger.WarnContext(ctx, "unconfirmed: skip bad record", "sale_id", x.sale, "order_id", x.order, "err", err)
			continue
		}
		if r.Active {
			out = append(out, *r)
		}
	}
	return out, nil
}
