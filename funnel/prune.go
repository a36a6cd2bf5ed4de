package funnel

import (
	"context"
	"time"
)

// Pruning the outbox. Every order writes its events in the outbox; once
// every transport in use has them (and with no transport, at once) they are
// only history, and the delivery log grows by an attempt per event and
// transport. Each instance deletes what is older than the retention every
// PruneEvery, in chunks; deletes are by primary key and idempotent, so
// instances running it at once only share the work.
const (
	// PruneEvery is how often the outbox is pruned.
	PruneEvery = 10 * time.Minute
	// pruneChunk is the most rows of each table one call deletes: one
	// short transaction, not a lock held over a week's events.
	pruneChunk = 1000
	// pruneChunks bounds one run, so a first run over months of history
	// spreads over several periods.
	pruneChunks = 100
)

// prune prunes the outbox every PruneEvery until ctx ends.
func (d *dispatcher) prune(ctx context.Context) {
	d.pruneOutbox(ctx) // at start too: an instance that restarts often still prunes
	every(ctx, PruneEvery, nil, d.pruneOutbox)
}

// pruneOutbox deletes the outbox's rows older than the retention, a chunk
// at a time, until a chunk comes back short.
func (d *dispatcher) pruneOutbox(ctx context.Context) {
	before := d.now().Add(-d.retention)
	var notices, deliveries int
	for range pruneChunks {
		n, m, err := d.store.PruneOutbox(ctx, before, pruneChunk)
		notices, deliveries = notices+n, deliveries+m
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("outbox pruning failed; the next run tries again", "err", err, "every", PruneEvery)
			}
			break
		}
		if n < pruneChunk && m < pruneChunk {
			break
		}
	}
	if notices+deliveries > 0 {
		d.log.Info("outbox pruned", "notices", notices, "deliveries", deliveries, "before", before)
	}
}
