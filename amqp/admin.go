package amqp

import (
	"context"
	"errors"
	"fmt"
)

// DeleteTopology removes the order path's exchanges and queues that cfg
// names (cfg.Name's "<name>.orders" and its dead letters), messages and
// all: what a throwaway deployment (a benchmark's) leaves on a shared
// broker once nothing uses it.
func DeleteTopology(ctx context.Context, cfg Config) error {
	conn, err := dial(ctx, cfg, "admin")
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("delete topology: open channel: %w", err)
	}
	_, errQueue := ch.QueueDelete(cfg.queue(), false, false, false)
	_, errDead := ch.QueueDelete(cfg.deadQueue(), false, false, false)
	return errors.Join(errQueue, errDead,
		ch.ExchangeDelete(cfg.exchange(), false, false),
		ch.ExchangeDelete(cfg.deadExchange(), false, false))
}
