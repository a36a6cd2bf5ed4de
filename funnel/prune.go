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

func (s *Service) pruneLoop(ctx context.Context) {
	defer s.done.Done()
	s.pruneOutbox(ctx) // at start too: an instance that restarts often still prunes
	every(ctx, PruneEvery, nil, s.pruneOutbox)
}

// pruneOutbox deletes the outbox's rows older than the retention, a chunk
// at a time, until a chunk comes back short.
func (s *Service) pruneOutbox(ctx context.Context) {
	before := s.now().Add(-s.retention)
	var notices, deliveries int
	for range pruneChunks {
		n, d, err := s.store.PruneOutbox(ctx, before, pruneChunk)
		notices, deliveries = notices+n, deliveries+d
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("outbox pruning failed; the next run tries again", "err", err, "every", PruneEvery)
			}
			break
		}
		if n < pruneChunk && d < pruneChunk {
			break
		}
	}
	if notices+deliveries > 0 {
		s.log.Info("outbox pruned", "notices", notices, "deliveries", deliveries, "before", before)
	}
}
