package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/redis"
)

// partsNote says in the report how bench --parts measured the parts.
func partsNote(l Loop) string {
	return fmt.Sprintf("Parts (--parts), each alone with the loop's %d workers for %s, between the ceiling's round and the target's: "+
		"%s is the ceiling's round (guests, a token and a purchase each, per second); "+
		"reserve is the Redis stock engine's work for an accepted purchase (package redis: the reserve script spending the purchase token, "+
		"with the order index in the same pipeline, then the confirm), a new guest each call, on a throwaway sale of %d rooms "+
		"under a key prefix of its own, removed after the round; publish is a publisher-confirmed persistent publish of that order "+
		"(package amqp, one publisher as one instance has) to a quorum queue of its own, deleted after the round. "+
		"They run on --redis-url and --amqp-url, which should be the target's own.",
		l.Conns, l.Duration, PartHTTP, partStock)
}

// benchParts runs one round's parts of an accepted purchase that are not
// HTTP, each alone with l's workers for l's duration, on Redis and
// RabbitMQ names of the round's own that it removes after, and returns
// them after the ceiling's round, the HTTP part.
func benchParts(ctx context.Context, f *flags, l Loop, round int, ceiling *Result) (*PartsRound, error) {
	name := fmt.Sprintf("flashsale-bench-%s-parts-r%d", RunID(), round)
	defer cleanupDistributed(f.redisURL, f.amqpURL, name)
	users := fmt.Sprintf("b%s-parts-r%d-", RunID(), round)
	log := slog.New(slog.DiscardHandler)

	e, sale, err := OpenPartEngine(ctx, f.redisURL, name+":")
	if err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	reserve := RunPart(ctx, l, "reserve", ReservePart(e, sale, users))
	e.Close()
	p, err := amqp.NewPublisher(ctx, amqp.Config{URL: f.amqpURL, Name: name}, log)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	publish := RunPart(ctx, l, "publish", PublishPart(users, p))
	p.Close()
	for _, r := range []*PartResult{reserve, publish} {
		if r.Calls == 0 && ctx.Err() == nil {
			return nil, fmt.Errorf("%s: no call succeeded in %.1f s, the first error: %s", r.Name, r.Seconds, r.FirstError)
		}
	}
	return &PartsRound{Parts: []*PartResult{CeilingPart(ceiling), reserve, publish}}, ctx.Err()
}

// partStock is the rooms of the parts' sale: more than any run reserves.
const partStock = 1_000_000_000

// OpenPartEngine opens the Redis engine under prefix and loads a sale of
// its own that no run sells out.
func OpenPartEngine(ctx context.Context, url, prefix string) (*redis.Engine, *flashsale.Sale, error) {
	e, err := redis.Open(ctx, url, redis.Options{Prefix: prefix}, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	sale := &flashsale.Sale{
		ID: "parts", Nights: []flashsale.Night{{Date: now.AddDate(0, 1, 0).Format(time.DateOnly), Stock: partStock}},
		Price: 39900, StartsAt: now.Add(-time.Second), EndsAt: now.Add(time.Hour),
		PerUserLimit: partStock, HoldSeconds: 300, PurchaseToken: true,
	}
	if err := e.Load(ctx, &flashsale.StockSnapshot{Sale: sale}, now); err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("load the parts' sale: %w", err)
	}
	return e, sale, nil
}

// partReservation is guest i's order, as a purchase of one room for one
// night makes it (an order ID of a ULID's 26 characters).
func partReservation(saleID, users string, i int) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID: fmt.Sprintf("01PARTS%019d", i), SaleID: saleID, UserID: fmt.Sprintf("%sg%d", users, i),
		Nights: 1, Rooms: 1, Amount: 39900, HoldExpiresAt: time.Now().Add(5 * time.Minute).UTC().Truncate(time.Millisecond), Active: true,
	}
}

// ReservePart is the Redis work of an accepted purchase of sale, the
// server's own calls: the reserve spending the purchase token (with the
// order index in the same pipeline), then the confirm once the order is
// published (written in the background, as the server's is).
func ReservePart(e *redis.Engine, sale *flashsale.Sale, users string) Part {
	return func(ctx context.Context, i int) error {
		r := partReservation(sale.ID, users, i)
		if _, err := e.ReserveSpending(ctx, r, r.OrderID, r.HoldExpiresAt); err != nil {
			return err
		}
		return e.Confirm(ctx, r.SaleID, r.OrderID)
	}
}

// PublishPart is the order path's publish of an accepted purchase: a
// persistent message of the order, confirmed by the broker, through the
// publishers in turn.
func PublishPart(users string, ps ...*amqp.Publisher) Part {
	return func(ctx context.Context, i int) error {
		_, err := ps[i%len(ps)].Write(ctx, partReservation("parts", users, i))
		return err
	}
}
