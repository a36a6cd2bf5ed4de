package redis

import (
	"context"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The fence coordinates a rebuild of the engine from the database across
// every instance (funnel/heal.go drives it). Its keys are global, outside
// any sale's slot, and each command touches one key, so it works on a
// Cluster too:
//
//	<prefix>heal       string: the epoch of the rebuild in progress, with a TTL (the lease)
//	<prefix>instances  sorted set: instance id scored by its last heartbeat (ms)
//	<prefix>paused     hash: instance id -> the epoch its consumer paused for

// fenceStale is how old a heartbeat may be before its instance is taken
// for dead: a few missed beats, well under the time a rebuild may wait.
const fenceStale = 3 * time.Second

var (
	// endScript deletes the lease only if it is still ours.
	endScript = goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	// extendScript renews the lease only if it is still ours.
	extendScript = goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
)

// Lead takes the rebuild lease for epoch if nobody holds it.
func (e *Engine) Lead(ctx context.Context, epoch string, lease time.Duration) (bool, error) {
	ok, err := e.client.SetNX(ctx, e.prefix+"heal", epoch, lease).Result()
	if err != nil {
		return false, unavailable("fence: lead", err)
	}
	return ok, nil
}

// Extend renews the lease while the rebuild runs; false if it was lost.
func (e *Engine) Extend(ctx context.Context, epoch string, lease time.Duration) (bool, error) {
	n, err := extendScript.Run(ctx, e.client, []string{e.prefix + "heal"}, epoch, lease.Milliseconds()).Int()
	if err != nil {
		return false, unavailable("fence: extend", err)
	}
	return n == 1, nil
}

// End releases the lease if it is still epoch's.
func (e *Engine) End(ctx context.Context, epoch string) error {
	if err := endScript.Run(ctx, e.client, []string{e.prefix + "heal"}, epoch).Err(); err != nil {
		return unavailable("fence: end", err)
	}
	return nil
}

// Healing returns the epoch of the rebuild in progress, or "".
func (e *Engine) Healing(ctx context.Context) (string, error) {
	epoch, err := e.client.Get(ctx, e.prefix+"heal").Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", unavailable("fence: healing", err)
	}
	return epoch, nil
}

// Beat records that instance is alive and which epoch its consumer is
// paused for ("" when it consumes), and counts the live instances for
// Instances.
func (e *Engine) Beat(ctx context.Context, instance, paused string) error {
	now := time.Now()
	var live *goredis.IntCmd
	_, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZAdd(ctx, e.prefix+"instances", goredis.Z{Score: float64(now.UnixMilli()), Member: instance})
		p.ZRemRangeByScore(ctx, e.prefix+"instances", "-inf", "("+strconv.FormatInt(now.Add(-fenceStale).UnixMilli(), 10))
		live = p.ZCard(ctx, e.prefix+"instances")
		if paused == "" {
			p.HDel(ctx, e.prefix+"paused", instance)
		} else {
			p.HSet(ctx, e.prefix+"paused", instance, paused)
		}
		return nil
	})
	if err != nil {
		return unavailable("fence: beat", err)
	}
	e.live.Store(live.Val())
	return nil
}

// Instances is how many instances share this Redis, as the last Beat
// counted them (each beats every quarter second; one gone is forgotten
// after fenceStale): what each counts its share of the rate limits for
// (flashsale.Shared). Until the first beat, and while Redis does not
// answer, the last count stands (1 before any).
func (e *Engine) Instances() int { return int(max(e.live.Load(), 1)) }

// Paused lists the live instances whose consumers are not yet paused for epoch.
func (e *Engine) Paused(ctx context.Context, epoch string) (waiting []string, err error) {
	var live *goredis.StringSliceCmd
	var paused *goredis.MapStringStringCmd
	_, err = e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		live = p.ZRangeByScore(ctx, e.prefix+"instances", &goredis.ZRangeBy{
			Min: strconv.FormatInt(time.Now().Add(-fenceStale).UnixMilli(), 10), Max: "+inf",
		})
		paused = p.HGetAll(ctx, e.prefix+"paused")
		return nil
	})
	if err != nil {
		return nil, unavailable("fence: paused", err)
	}
	for _, id := range live.Val() {
		if paused.Val()[id] != epoch {
			waiting = append(waiting, id)
		}
	}
	return waiting, nil
}

// Unload removes a sale's stock from Redis (its meta key), so every
// instance answers its purchases ErrNotLoaded until the rebuild loads it
// again: a rebuild of a sale that is loaded but drifted closes it first.
// Records, keys and the outbox stay until the Load replaces them.
func (e *Engine) Unload(ctx context.Context, saleID string) error {
	if err := e.client.Del(ctx, e.saleKeys(saleID).meta).Err(); err != nil {
		return unavailable("fence: unload sale="+saleID, err)
	}
	e.flags.clearSale(saleID)
	return nil
}

// Forget implements flashsale.StockKeeper: the sale's meta goes, as in
// Unload, so every instance answers ErrNotLoaded for it at once, and this
// process's cache of its keys goes too. Its other keys (records, the
// outbox) expire on their own a day after its last hold (expireAt): an
// unconfirmed reservation is still republished until then.
func (e *Engine) Forget(ctx context.Context, saleID string) error {
	if err := e.Unload(ctx, saleID); err != nil {
		return err
	}
	e.keys.Delete(saleID)
	return nil
}
