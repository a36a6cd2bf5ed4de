// Package redis is the distributed stock engine: every reservation is one
// Lua script on Redis (a single node or a Redis Cluster), so any number of
// stateless instances share exact stock, per-user limits and idempotency
// keys. It also carries the pieces the distributed order path needs around
// the engine: a sold-out broadcast that lets each instance refuse a
// sold-out stay without a round trip, purchase tokens spent inside the
// reserve script, and an outbox of reservations the queue has not confirmed
// yet.
//
// Keys of one sale share the hash tag {<sale id>} so that every script
// touches a single Cluster slot:
//
//	<prefix>{<sale>}:meta         hash: starts, ends, limit, hold, nights, expire
//	<prefix>{<sale>}:stock        hash: night index -> units left
//	<prefix>{<sale>}:users        hash: user id -> rooms held by active reservations
//	<prefix>{<sale>}:keys         hash: user id NUL idempotency key -> order id
//	<prefix>{<sale>}:res          hash: order id -> reservation record (record.go)
//	<prefix>{<sale>}:unconfirmed  sorted set: order id scored by reserve time (ms)
//	<prefix>order:<order>         string: sale id (a hint that lets Reservation find the sale)
//	<prefix>sales                 sorted set: sale id scored by its keys' expiry (ms)
//	<prefix>{<sale>}:token:<id>   string: a spent purchase token, until the token expires
//	<prefix>soldout               pub/sub channel of the sold-out broadcast
//
// Every sale key expires at the sale's end plus its hold window plus a day.
package redis

import (
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
)

// Defaults for Options.
const (
	PrefixDefault = "flashsale:"
	// keyTTLSlack keeps a sale's keys a day past its last possible hold, so
	// late payments and the relay still find them.
	keyTTLSlack = 24 * time.Hour
	// stageTTL bounds how long the staging keys of a crashed Load linger.
	stageTTL = 10 * time.Minute
	// loadChunk is how many hash fields one HSET of a Load carries.
	loadChunk = 1000
)

// PoolSizeDefault sizes the connection pool for many concurrent goroutines:
// a purchase flood parks thousands of goroutines on Reserve, and Redis reads
// every ready socket per event-loop turn, so more connections batch better.
var PoolSizeDefault = max(64, 32*runtime.GOMAXPROCS(0))

// Options tune an Engine. The zero value is usable.
type Options struct {
	// Prefix starts every key and the channel name; default "flashsale:".
	// Tests use a random prefix so they never collide.
	Prefix string
	// PoolSize is the connection pool size (per node on a Cluster);
	// default PoolSizeDefault.
	PoolSize int
	// Timeout bounds writing every command and reading its reply; default
	// TimeoutDefault. A caller's context deadline applies too, whichever
	// ends first. A Redis that stalls (SIGSTOP, a failover, a full network
	// buffer) is then an ErrUnavailable within Timeout, never a hang.
	// Waiting for a free connection is bounded by the caller's deadline
	// and by poolTimeout: in a storm thousands of callers queue for the
	// pool behind commands that are all quick, and that queue is load,
	// not a stalled Redis.
	Timeout time.Duration
	// Hook, when set, sees every command the engine sends (tracing's
	// RedisHook: a client span per command of a traced call).
	Hook goredis.Hook
}

// TimeoutDefault is Options.Timeout's default: a reserve takes well under
// a millisecond in Redis, so half a second only trips on a Redis that has
// stopped answering, or on a machine so overloaded that a 503 is right.
const TimeoutDefault = 500 * time.Millisecond

// poolTimeout bounds the wait for a pool connection when the caller's
// context has no deadline (the service's requests all have one: the
// background loops and tests do not). A command that timed out waiting was
// never sent; go-redis used to retry it three times (5 s each), and with
// its retries off (noRetries) one wait takes their place, as long as the
// four did: with one wait of 5 s, stocktest's storm (10 000 reserves from
// 2 000 goroutines) failed with pool timeouts under a full CI run on a
// 2-core machine.
const poolTimeout = 20 * time.Second

var (
	//go:embed reserve.lua
	reserveLua string
	//go:embed release.lua
	releaseLua string
	//go:embed retake.lua
	retakeLua string
	//go:embed load.lua
	loadLua string
	//go:embed adjust.lua
	adjustLua string
	//go:embed read.lua
	readLua string
	//go:embed stayrules.lua
	stayRulesLua string
	//go:embed retain.lua
	retainLua string

	reserveScript = goredis.NewScript(scriptSource(reserveLua))
	releaseScript = goredis.NewScript(scriptSource(releaseLua))
	retakeScript  = goredis.NewScript(scriptSource(retakeLua))
	loadScript    = goredis.NewScript(scriptSource(loadLua))
	adjustScript  = goredis.NewScript(scriptSource(adjustLua))
	readScript    = goredis.NewScript(scriptSource(readLua))
	rulesScript   = goredis.NewScript(scriptSource(stayRulesLua))
	retainScript  = goredis.NewScript(scriptSource(retainLua))
)

// Engine is the Redis stock engine. It is safe for concurrent use.
type Engine struct {
	client  goredis.UniversalClient
	logger  *slog.Logger
	prefix  string
	channel string

	keys sync.Map // sale id -> *saleKeys

	flags  soldOutFlags
	pubsub *goredis.PubSub
	done   chan struct{} // closed when the subscriber goroutine has returned

	lazy lazyWriter // writes nobody waits for: confirms, stale index entries
	// lookups batches concurrent Lookups (lookup.go); timeout bounds one
	// batch, whose callers may each have their own deadline.
	lookups lookups
	timeout time.Duration

	// live is how many instances beat at the last Beat (fence.go), for
	// Instances; 0 before the first.
	live atomic.Int64
}

// Roles is the engine as the service takes it, its own outbox included:
// reserve.lua records every reservation there.
func (e *Engine) Roles() flashsale.StockEngine {
	return flashsale.StockEngine{Reserver: e, StockKeeper: e, Outbox: e}
}

// Open connects to Redis, subscribes to the sold-out broadcast and returns
// an Engine. url is redis://[user:pass@]host:port[/db] for one node, or a
// comma-separated seed list redis://h1:p1,h2:p2,h3:p3 for a Cluster.
func Open(ctx context.Context, url string, opts Options, logger *slog.Logger) (*Engine, error) {
	client, err := newClient(url, opts)
	if err != nil {
		return nil, fmt.Errorf("open redis: %w", err)
	}
	if opts.Hook != nil {
		client.AddHook(opts.Hook)
	}
	setLogger(logger)
	prefix := cmp.Or(opts.Prefix, PrefixDefault)
	e := &Engine{
		client:  client,
		logger:  logger,
		prefix:  prefix,
		channel: prefix + "soldout",
		done:    make(chan struct{}),
		timeout: cmp.Or(opts.Timeout, TimeoutDefault),
	}
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("open redis: ping: %w", err)
	}
	e.checkEviction(ctx)
	// Wait for the subscription to be confirmed so that no broadcast sent
	// after Open returns is missed.
	e.pubsub = client.Subscribe(ctx, e.channel)
	if _, err := e.pubsub.Receive(ctx); err != nil {
		e.pubsub.Close()
		client.Close()
		return nil, fmt.Errorf("open redis: subscribe %s: %w", e.channel, err)
	}
	go e.listen(e.pubsub.ChannelWithSubscriptions(goredis.WithChannelSize(1024)))
	e.lazy.start(e)
	return e, nil
}

// checkEviction warns when Redis may evict the engine's keys. The stale
// check sees a Redis that is another process, not a key that went: an
// evicted idempotency binding lets a retry take a second room, an evicted
// reservation record lets a release or payment miss it. Every sale key has
// an expiry (the sale's end), so volatile-* policies evict them too, and
// managed Redis often defaults to volatile-lru. Where CONFIG is not
// allowed (some managed services), it says it could not tell.
func (e *Engine) checkEviction(ctx context.Context) {
	check := func(ctx context.Context, c *goredis.Client) error {
		policy, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			e.logger.InfoContext(ctx, "cannot read Redis's maxmemory-policy; it must be noeviction (docs/operations.md, Recommended Redis settings)",
				"addr", c.Options().Addr, "err", err)
			return nil
		}
		if p := policy["maxmemory-policy"]; p != "noeviction" {
			e.logger.WarnContext(ctx, "Redis may evict the stock engine's keys: a lost idempotency binding or reservation record goes unnoticed; set maxmemory-policy noeviction",
				"addr", c.Options().Addr, "maxmemory_policy", p)
		}
		return nil
	}
	switch c := e.client.(type) {
	case *goredis.ClusterClient:
		c.ForEachMaster(ctx, check)
	case *goredis.Client:
		check(ctx, c)
	}
}

// newClient picks a Client for one address and a ClusterClient for a seed list.
func newClient(raw string, opts Options) (goredis.UniversalClient, error) {
	poolSize := cmp.Or(opts.PoolSize, PoolSizeDefault)
	timeout := cmp.Or(opts.Timeout, TimeoutDefault)
	u, err := url.Parse(raw)
	if err != nil || !strings.Contains(u.Host, ",") {
		o, err := goredis.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		o.PoolSize = poolSize
		o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, poolTimeout
		o.ContextTimeoutEnabled = true
		o.MaxRetries = noRetries
		return goredis.NewClient(o), nil
	}
	addrs := strings.Split(u.Host, ",")
	// ParseURL understands user, password, TLS and query options: reuse it
	// with the first seed, then hand the whole list to the Cluster client.
	first := *u
	first.Host = addrs[0]
	o, err := goredis.ParseURL(first.String())
	if err != nil {
		return nil, err
	}
	if o.DB != 0 {
		return nil, errors.New("a Redis Cluster has only database 0")
	}
	return goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 addrs,
		Username:              o.Username,
		Password:              o.Password,
		TLSConfig:             o.TLSConfig,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           poolTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              poolSize,
		MaxRetries:            noRetries,
		// go-redis reloads its slot map on MOVED, or when it is older than
		// this (60 s by default): a dead master refuses connections and
		// answers no MOVED, so after a failover every call to its slots
		// went to the dead node for up to a minute (issue 21: the first
		// 202 of the failed-over sale came 62 s after the kill). One
		// CLUSTER SLOTS a second while commands flow is cheap.
		ClusterStateReloadInterval: clusterReload,
		// One dial per call: go-redis dials a node 5 times, 100 ms apart,
		// before it gives up, so a call to a dead master held its caller
		// half a second, and a purchase of a sale on a live shard whose
		// rate-limit key sat on the dead one ran out its deadline (503).
		// A refused dial sent nothing: the call is certain not to have run.
		NewClient: func(o *goredis.Options) *goredis.Client {
			o.DialerRetries = 1
			return goredis.NewClient(o)
		},
	}), nil
}

// clusterReload bounds how stale the Cluster client's slot map may be.
const clusterReload = time.Second

// noRetries turns off go-redis's own retries (3 by default). It retries a
// command whose reply timed out or whose connection dropped after it was
// written, so a script Redis had already run ran again: a reserve that
// spent its token and answered sold out or over the limit answered
// token_invalid the second time (seen in CI under load), and a retake ran
// twice pins the order. The engine's callers decide instead: an outcome
// that is not known is ErrIndeterminate (the outbox settles it), never a
// second run. The Cluster client keeps its redirect loop (MaxRedirects):
// it must follow MOVED and ASK, and it also tries a timed-out command once
// more, which go-redis offers no way to turn off alone; a re-run there is
// safe for every script but costs a guest the right refusal code, and a
// retake run twice pins its order (the audit releases it).
const noRetries = -1

// Close writes the queued confirms and index deletions, stops the
// subscriber and closes the connections. Close the order path (the
// publisher and the relay) first, as cmd/flashsale does: a Confirm that
// arrives after Close is sent directly and fails with ErrUnavailable.
func (e *Engine) Close() error {
	e.lazy.stop()
	err := e.pubsub.Close()
	<-e.done
	return errors.Join(err, e.client.Close())
}

// Ping reports whether Redis answers, for readiness checks.
func (e *Engine) Ping(ctx context.Context) error {
	if err := e.client.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// saleKeys are the key names of one sale, built once per sale so the hot
// path does not concatenate strings.
type saleKeys struct {
	meta, stock, users, keys, res, unconfirmed string
	token                                      string // prefix of the spent-token keys
	reserve, release, retake                   []string

	// expire is the sale's key expiry (unix ms) as last seen by this engine
	// (its own Load, or an accepted Reserve's reply), or 0. Reserve gives
	// the order index the same expiry without waiting for the script.
	expire atomic.Int64
}

func (e *Engine) saleKeys(saleID string) *saleKeys {
	if k, ok := e.keys.Load(saleID); ok {
		return k.(*saleKeys)
	}
	base := e.prefix + "{" + saleID + "}:"
	k := &saleKeys{
		meta: base + "meta", stock: base + "stock", users: base + "users",
		keys: base + "keys", res: base + "res", unconfirmed: base + "unconfirmed",
		token: base + "token:",
	}
	k.reserve = []string{k.meta, k.stock, k.users, k.keys, k.res, k.unconfirmed}
	k.release = []string{k.meta, k.stock, k.users, k.res, k.unconfirmed}
	k.retake = []string{k.meta, k.stock, k.users, k.res, k.unconfirmed}
	v, _ := e.keys.LoadOrStore(saleID, k)
	return v.(*saleKeys)
}

func (e *Engine) orderKey(orderID string) string { return e.prefix + "order:" + orderID }
func (e *Engine) salesKey() string               { return e.prefix + "sales" }

// expireAt is when a sale's keys expire: after the last hold can end, plus
// a day for late payments and the relay. A sale loaded after that (a replay
// or a test with fixed dates) still keeps its keys for a day.
func expireAt(s *flashsale.Sale) int64 {
	return max(s.EndsAt.Add(s.HoldDuration()+keyTTLSlack).UnixMilli(), time.Now().Add(keyTTLSlack).UnixMilli())
}

// unavailable wraps a Redis failure so callers see ErrUnavailable (a 503 and
// the circuit breaker's signal) while the cause stays in the chain.
func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, flashsale.ErrUnavailable, err)
}

// Load installs a sale's stock from a snapshot. The data is first staged
// into temporary keys (in chunks, so a sale with many orders never builds
// one huge command), then one script checks ErrAlreadyStarted and swaps the
// staging in atomically; readers see the old sale or the new one, never a mix.
func (e *Engine) Load(ctx context.Context, snap *flashsale.StockSnapshot, now time.Time) error {
	s := snap.Sale
	if s == nil || len(s.Nights) == 0 {
		return flashsale.Errorf(flashsale.EInvalid, "load: snapshot has no sale or no nights")
	}
	k := e.saleKeys(s.ID)
	expire := expireAt(s)

	// The sale is registered before its keys exist: a crash in between
	// leaves a harmless empty entry, never a loaded sale the relay misses.
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	if _, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, e.salesKey(), "-inf", "("+nowMs)
		p.ZAdd(ctx, e.salesKey(), goredis.Z{Score: float64(expire), Member: s.ID})
		return nil
	}); err != nil {
		return unavailable("load: sale="+s.ID, err)
	}

	var tok [8]byte
	rand.Read(tok[:])
	stage := e.prefix + "{" + s.ID + "}:load:" + hex.EncodeToString(tok[:]) + ":"
	staged := [4]string{stage + "stock", stage + "users", stage + "keys", stage + "res"}

	stock := make([]any, 0, 2*len(s.Nights))
	for i, n := range s.Nights {
		avail := n.Stock
		if len(snap.Nights) == len(s.Nights) {
			avail = snap.Nights[i].Available
		}
		stock = append(stock, i, max(avail, 0))
	}
	users := map[string]int{}
	var keys, res []any
	var rec []byte
	for i := range snap.Reservations {
		r := &snap.Reservations[i]
		if r.Active {
			users[r.UserID] += r.Rooms
		}
		if r.IdempotencyKey != "" {
			keys = append(keys, keyField(r.UserID, r.IdempotencyKey), r.OrderID)
		}
		rec = append(rec[:0], '0')
		if r.Active {
			rec[0] = '1'
		}
		rec = appendRecord(rec, r)
		res = append(res, r.OrderID, string(rec))
	}
	userArgs := make([]any, 0, 2*len(users))
	for u, n := range users {
		userArgs = append(userArgs, u, n)
	}
	if err := e.stage(ctx, staged, [4][]any{stock, userArgs, keys, res}); err != nil {
		return unavailable("load: sale="+s.ID+": stage", err)
	}

	seen := e.flags.loaded(s.ID)
	reply, err := loadScript.Run(ctx, e.client,
		[]string{k.meta, k.stock, k.users, k.keys, k.res, k.unconfirmed, staged[0], staged[1], staged[2], staged[3]},
		append([]any{nowMs, s.StartsAt.UnixMilli(), s.EndsAt.UnixMilli(), s.PerUserLimit, s.HoldSeconds,
			len(s.Nights), expire, e.channel, s.ID}, ruleFields(s.StayRules())...)...).Slice()
	if err != nil {
		return unavailable("load: sale="+s.ID, err)
	}
	switch code(reply) {
	case replyOK:
	case replyStarted:
		return fmt.Errorf("load: sale=%s: %w", s.ID, flashsale.ErrAlreadyStarted)
	default:
		return unavailable("load: sale="+s.ID, errors.New("staged stock expired before commit"))
	}
	// The broadcast clears every engine's flags; clear ours now, unless
	// the broadcast already reached us, so this engine never answers sold
	// out from the previous load.
	e.flags.clearUnlessReloaded(s.ID, seen)
	k.expire.Store(expire)

	if err := e.indexOrders(ctx, s.ID, snap.Reservations, expire); err != nil {
		// Reservation falls back to asking every known sale, so a missing
		// index costs latency, not correctness.
		e.logger.WarnContext(ctx, "index loaded orders", "sale_id", s.ID, "err", err)
	}
	e.logger.InfoContext(ctx, "sale loaded", "sale_id", s.ID, "nights", len(s.Nights),
		"reservations", len(snap.Reservations))
	return nil
}

// stage writes field/value pairs into the staging hashes in chunks.
func (e *Engine) stage(ctx context.Context, keys [4]string, pairs [4][]any) error {
	p := e.client.Pipeline()
	queued := 0
	for i, kv := range pairs {
		for len(kv) > 0 {
			n := min(len(kv), 2*loadChunk)
			p.HSet(ctx, keys[i], kv[:n]...)
			p.PExpire(ctx, keys[i], stageTTL)
			kv = kv[n:]
			if queued++; queued%16 == 0 {
				if _, err := p.Exec(ctx); err != nil {
					return err
				}
			}
		}
	}
	_, err := p.Exec(ctx)
	if errors.Is(err, goredis.Nil) {
		err = nil // an empty pipeline
	}
	return err
}

// indexOrders points each order ID at its sale so Reservation can find it.
func (e *Engine) indexOrders(ctx context.Context, saleID string, rs []flashsale.Reservation, expire int64) error {
	for len(rs) > 0 {
		n := min(len(rs), loadChunk)
		if _, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range rs[:n] {
				p.Do(ctx, "set", e.orderKey(rs[i].OrderID), saleID, "pxat", expire)
			}
			return nil
		}); err != nil {
			return err
		}
		rs = rs[n:]
	}
	return nil
}

func keyField(userID, key string) string { return userID + "\x00" + key }

// Reserve runs reserve.lua. A stay touching a night this engine has heard
// is sold out is refused locally without a round trip, unless the request
// carries an idempotency key: a retry must still find its earlier order,
// and only Redis knows it.
//
// The order index is written in the same pipeline as the script, so an
// accepted purchase costs one round trip. The index lives outside the
// sale's slot (Reservation has only the order id), so the script cannot
// write it, and Redis offers no way to make one command of a pipeline
// depend on another's reply. It is therefore written whatever the script
// answers:
//   - accepted: the index is in place before Reserve returns, as before;
//   - refused for stock, limit, a bad stay or an unloaded sale: the order id
//     never got a reservation and is never reused (a fresh ULID per
//     attempt). The entry is deleted in the background, and until then it
//     is harmless because Reservation checks the sale's records and falls
//     back to asking every sale when the indexed one lacks the order;
//   - duplicate of another order (the idempotency key is taken): deleted
//     in the background as well;
//   - duplicate of this very order id (a retry whose first reply was lost):
//     kept, it names the order's sale.
func (e *Engine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	return e.reserve(ctx, r, "", time.Time{})
}

// ReserveSpending is Reserve with the purchase token spent by the same
// script (SET NX under the sale's hash tag), in the same round trip.
func (e *Engine) ReserveSpending(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	return e.reserve(ctx, r, token, expires)
}

func (e *Engine) reserve(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	if r.IdempotencyKey == "" && e.soldOut(r) {
		return "", flashsale.ErrSoldOut
	}
	k := e.saleKeys(r.SaleID)
	var field string
	if r.IdempotencyKey != "" {
		field = keyField(r.UserID, r.IdempotencyKey)
	}
	var buf [128]byte
	rec := appendRecord(buf[:0], r)
	now := time.Now()
	args := []any{r.OrderID, r.UserID, field, r.FirstNight, r.Nights, r.Rooms,
		now.UnixMilli(), rec, e.channel, r.SaleID}
	keys := k.reserve
	if token != "" {
		keys = append(keys[:len(keys):len(keys)], k.token+token)
		// SET needs an expiry in the future; a token past it was refused
		// before it got here, so a millisecond is as good as any.
		args = append(args, max(expires.UnixMilli(), now.UnixMilli()+1))
	}
	if r.Choices > 1 {
		if token == "" {
			args = append(args, 0)
		}
		args = append(args, r.Choices)
	}
	orderKey := e.orderKey(r.OrderID)

	var script, index *goredis.Cmd
	_, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		script = p.EvalSha(ctx, reserveScript.Hash(), keys, args...)
		index = p.Do(ctx, "set", orderKey, r.SaleID, "pxat", e.indexExpiry(k, r))
		return nil
	})
	if err != nil && isNoScript(script.Err()) {
		// A node that has not seen the script yet (a restart, a new Cluster
		// node): EVAL caches it for the next call. The index is written.
		script = reserveScript.Eval(ctx, e.client, keys, args...)
	}
	reply, err := script.Slice()
	if err != nil {
		return "", unavailable("reserve: sale="+r.SaleID, err)
	}
	switch code(reply) {
	case replyOK:
		if expire, _ := reply[1].(int64); expire != k.expire.Load() {
			k.expire.Store(expire)
		}
		if len(reply) > 2 && r.Choices > 1 {
			first, _ := reply[2].(int64)
			r.FirstNight = int(first)
		}
		if err := index.Err(); err != nil {
			// Reservation still finds the order by asking every known sale.
			e.logger.WarnContext(ctx, "index order", "sale_id", r.SaleID, "order_id", r.OrderID, "err", err)
		}
		return "", nil
	case replyExisting:
		existing, _ := reply[1].(string)
		if existing != r.OrderID {
			e.lazy.add(lazyWrite{key: orderKey, del: true})
		}
		return existing, flashsale.ErrDuplicate
	}
	e.lazy.add(lazyWrite{key: orderKey, del: true})
	switch code(reply) {
	case replySoldOut:
		return "", flashsale.ErrSoldOut
	case replyLimit:
		return "", flashsale.ErrLimitExceeded
	case replyNotLoaded:
		return "", flashsale.ErrNotLoaded
	case replyStale:
		return "", e.stale(ctx, r.SaleID)
	case replyInvalidStay:
		return "", flashsale.Errorf(flashsale.EInvalid, "the stay is outside the sale's nights or rooms is not positive")
	case replyTokenSpent:
		return "", flashsale.ErrTokenInvalid
	case replyRule:
		if err := ruleError(reply); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("reserve: sale=%s: unexpected script reply %v", r.SaleID, reply)
}

// SetStayRules runs stayrules.lua: the sale's rules change in one step.
func (e *Engine) SetStayRules(ctx context.Context, saleID string, rules []flashsale.StayRules) error {
	n := "" // no rules: whatever the sale's nights
	if rules != nil {
		n = strconv.Itoa(len(rules))
	}
	reply, err := rulesScript.Run(ctx, e.client, []string{e.saleKeys(saleID).meta},
		append([]any{n}, ruleFields(rules)...)...).Slice()
	if err != nil {
		return unavailable("set stay rules: sale="+saleID, err)
	}
	switch code(reply) {
	case replyOK:
		return nil
	case replyInvalidStay:
		return flashsale.Errorf(flashsale.EInvalid, "%d stay rules for another number of nights than sale %s has", len(rules), saleID)
	case replyNotLoaded:
		return flashsale.ErrNotLoaded
	case replyStale:
		return e.stale(ctx, saleID)
	}
	return fmt.Errorf("set stay rules: sale=%s: unexpected script reply %v", saleID, reply)
}

// Retain runs retain.lua: the sale's keys expire no sooner than Load of s
// would make them (its end plus its hold plus keyTTLSlack), and its entry
// in the engine's set of sales follows. The order index (orderKey) keeps
// its expiry: an order whose index lapses is found by asking every sale in
// that set, which costs latency, not correctness.
func (e *Engine) Retain(ctx context.Context, s *flashsale.Sale) error {
	k := e.saleKeys(s.ID)
	reply, err := retainScript.Run(ctx, e.client, k.reserve, expireAt(s), s.EndsAt.UnixMilli()).Slice()
	if err != nil {
		return unavailable("retain: sale="+s.ID, err)
	}
	switch code(reply) {
	case replyOK:
	case replyNotLoaded:
		return flashsale.ErrNotLoaded
	case replyStale:
		return e.stale(ctx, s.ID)
	default:
		return fmt.Errorf("retain: sale=%s: unexpected script reply %v", s.ID, reply)
	}
	expire, _ := reply[1].(int64)
	k.expire.Store(expire)
	if err := e.client.ZAdd(ctx, e.salesKey(), goredis.Z{Score: float64(expire), Member: s.ID}).Err(); err != nil {
		return unavailable("retain: sale="+s.ID, err)
	}
	return nil
}

// soldOut reports, from this engine's flags, that r certainly cannot be
// served: a night of its stay at zero, or with choices, every choice.
func (e *Engine) soldOut(r *flashsale.Reservation) bool {
	if r.Choices <= 1 {
		return e.flags.soldOut(r.SaleID, r.FirstNight, r.Nights)
	}
	for i := r.FirstNight; i < r.FirstNight+r.Choices; i++ {
		if !e.flags.soldOut(r.SaleID, i, 1) {
			return false
		}
	}
	return true
}

// indexExpiry is when the order index of r expires (unix ms): with the
// sale's keys when this engine knows their expiry, or else a day after the
// hold ends, long after the order has reached the database (the index only
// serves orders still in flight, and a missing index costs a slower
// Reservation, never a wrong one).
func (e *Engine) indexExpiry(k *saleKeys, r *flashsale.Reservation) int64 {
	now := time.Now()
	if expire := k.expire.Load(); expire > now.UnixMilli() {
		return expire
	}
	if r.HoldExpiresAt.After(now) {
		now = r.HoldExpiresAt
	}
	return now.Add(keyTTLSlack).UnixMilli()
}

func isNoScript(err error) bool {
	return errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT")
}

// Release runs release.lua. Releasing an unknown or inactive reservation
// does nothing; a sale that is not loaded is ErrNotLoaded.
func (e *Engine) Release(ctx context.Context, saleID, orderID string) error {
	k := e.saleKeys(saleID)
	reply, err := releaseScript.Run(ctx, e.client, k.release, orderID, e.channel, saleID).Slice()
	if err != nil {
		return unavailable("release: sale="+saleID+" order="+orderID, err)
	}
	switch code(reply) {
	case replyInactive:
		return nil
	case replyOK:
		// Other engines clear their flags when the broadcast arrives; this
		// one clears now so its own next Reserve sees the units at once.
		if csv, _ := reply[1].(string); csv != "" {
			e.flags.clearNights(saleID, csv)
		}
		return nil
	case replyNotLoaded:
		return flashsale.ErrNotLoaded
	case replyStale:
		return e.stale(ctx, saleID)
	}
	return fmt.Errorf("release: sale=%s order=%s: unexpected script reply %v", saleID, orderID, reply)
}

// Retake runs retake.lua. Retaking an active reservation does nothing.
func (e *Engine) Retake(ctx context.Context, saleID, orderID string) error {
	k := e.saleKeys(saleID)
	reply, err := retakeScript.Run(ctx, e.client, k.retake, orderID, e.channel, saleID, time.Now().UnixMilli()).Slice()
	if err != nil {
		return unavailable("retake: sale="+saleID+" order="+orderID, err)
	}
	switch code(reply) {
	case replyOK:
		return nil
	case replySoldOut:
		return flashsale.ErrSoldOut
	case replyLimit:
		return flashsale.ErrLimitExceeded
	case replyNotLoaded:
		return flashsale.ErrNotLoaded
	case replyStale:
		return e.stale(ctx, saleID)
	case replyUnknownOrder:
		return flashsale.ErrNotFound
	}
	return fmt.Errorf("retake: sale=%s order=%s: unexpected script reply %v", saleID, orderID, reply)
}

// AdjustStock runs adjust.lua: the units change in one step, and the
// sold-out broadcast tells every engine when the night crosses zero.
func (e *Engine) AdjustStock(ctx context.Context, saleID string, night, delta int) error {
	k := e.saleKeys(saleID)
	reply, err := adjustScript.Run(ctx, e.client, []string{k.meta, k.stock}, night, delta, e.channel, saleID).Slice()
	if err != nil {
		return unavailable("adjust stock: sale="+saleID, err)
	}
	switch code(reply) {
	case replyOK:
		if left, _ := reply[1].(int64); left > 0 {
			// As after a release: this engine's next Reserve sees the
			// units at once, before the broadcast comes back.
			e.flags.clearNights(saleID, strconv.Itoa(night))
		}
		return nil
	case replySoldOut:
		return flashsale.ErrStockInUse
	case replyInvalidStay:
		return flashsale.Errorf(flashsale.EInvalid, "night %d is not a night of sale %s", night, saleID)
	case replyNotLoaded:
		return flashsale.ErrNotLoaded
	case replyStale:
		return e.stale(ctx, saleID)
	}
	return fmt.Errorf("adjust stock: sale=%s: unexpected script reply %v", saleID, reply)
}

// Reservation returns a recorded reservation. The order index names its
// sale, but it is only a hint: when it is missing (its write failed, or the
// order came from a Load whose index write failed) or names a sale without
// the order (Reserve writes it even for a refused order id, see Reserve),
// it asks every sale in the sales set, in one pipelined round trip.
func (e *Engine) Reservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	saleID, err := e.client.Get(ctx, e.orderKey(orderID)).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return e.findReservation(ctx, orderID)
	case err != nil:
		return nil, unavailable("reservation: order="+orderID, err)
	}
	v, err := e.client.HGet(ctx, e.saleKeys(saleID).res, orderID).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return e.findReservation(ctx, orderID)
	case err != nil:
		return nil, unavailable("reservation: order="+orderID, err)
	}
	r, err := parseRecord(saleID, orderID, v)
	if err != nil {
		return nil, fmt.Errorf("reservation: order=%s: %w", orderID, err)
	}
	return r, nil
}

func (e *Engine) findReservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	sales, err := e.sales(ctx)
	if err != nil {
		return nil, unavailable("reservation: order="+orderID, err)
	}
	if len(sales) == 0 {
		return nil, flashsale.ErrNotFound
	}
	cmds := make([]*goredis.StringCmd, len(sales))
	_, err = e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, s := range sales {
			cmds[i] = p.HGet(ctx, e.saleKeys(s).res, orderID)
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, unavailable("reservation: order="+orderID, err)
	}
	for i, c := range cmds {
		if v, err := c.Result(); err == nil {
			r, err := parseRecord(sales[i], orderID, v)
			if err != nil {
				return nil, fmt.Errorf("reservation: order=%s: %w", orderID, err)
			}
			return r, nil
		}
	}
	return nil, flashsale.ErrNotFound
}

// sales returns the IDs of the sales whose keys have not expired.
func (e *Engine) sales(ctx context.Context) ([]string, error) {
	return e.client.ZRangeByScore(ctx, e.salesKey(), &goredis.ZRangeBy{
		Min: strconv.FormatInt(time.Now().UnixMilli(), 10), Max: "+inf",
	}).Result()
}

// Available returns the units left per night.
func (e *Engine) Available(ctx context.Context, saleID string) ([]int, error) {
	avail, _, err := e.read(ctx, saleID, false)
	if err != nil {
		return nil, fmt.Errorf("available: %w", err)
	}
	return avail, nil
}

// read runs read.lua: the units left per night and, with records, every
// reservation record, in one atomic step behind the stale check.
func (e *Engine) read(ctx context.Context, saleID string, records bool) (avail []int, res []any, err error) {
	k := e.saleKeys(saleID)
	flag := "0"
	if records {
		flag = "1"
	}
	reply, err := readScript.Run(ctx, e.client, []string{k.meta, k.stock, k.res}, flag).Slice()
	if err != nil {
		return nil, nil, unavailable("sale="+saleID, err)
	}
	switch code(reply) {
	case replyOK:
	case replyNotLoaded:
		return nil, nil, flashsale.ErrNotLoaded
	case replyStale:
		return nil, nil, e.stale(ctx, saleID)
	default:
		return nil, nil, fmt.Errorf("sale=%s: unexpected script reply %v", saleID, reply)
	}
	if len(reply) != 4 {
		return nil, nil, fmt.Errorf("sale=%s: unexpected script reply %v", saleID, reply)
	}
	n, _ := reply[1].(int64)
	stock, _ := reply[2].([]any)
	res, _ = reply[3].([]any)
	if avail, err = unitsOf(saleID, n, stock); err != nil {
		return nil, nil, err
	}
	return avail, res, nil
}

// unitsOf reads a sale's stock hash (HGETALL's night, units pairs) as the
// units left of each of its n nights.
func unitsOf(saleID string, n int64, stock []any) ([]int, error) {
	avail := make([]int, n)
	for i := 0; i+1 < len(stock); i += 2 {
		f, _ := stock[i].(string)
		v, _ := stock[i+1].(string)
		if f == "" {
			continue // the sentinel (redis/reply.go)
		}
		night, err1 := strconv.Atoi(f)
		a, err2 := strconv.Atoi(v)
		if err1 != nil || err2 != nil || night < 0 || night >= int(n) {
			return nil, fmt.Errorf("sale=%s: bad stock field %q=%q", saleID, f, v)
		}
		avail[night] = a
	}
	return avail, nil
}

// stale logs a sale that a script found loaded by another Redis process
// (restarted from a snapshot or an AOF, or a replica promoted) and has
// unloaded: to the funnel it is a sale not loaded, which the heal loop
// rebuilds behind the fence.
func (e *Engine) stale(ctx context.Context, saleID string) error {
	e.flags.clearSale(saleID)
	e.logger.WarnContext(ctx, "stale stock engine: the sale was loaded by another Redis process "+
		"(a restart from a snapshot or an AOF, or a failover), or one of its keys lost its contents "+
		"(evicted or deleted); unloaded until the fenced rebuild", "sale_id", saleID)
	return flashsale.ErrNotLoaded
}

// Snapshot reads the sale's units left and every reservation record in
// one step (read.lua), so the two agree: an audit comparing them with the
// database must not see a reserve half-applied.
func (e *Engine) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	avail, res, err := e.read(ctx, saleID, true)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	snap := &flashsale.StockSnapshot{Nights: make([]flashsale.NightStock, len(avail))}
	for i, a := range avail {
		snap.Nights[i].Available = a
	}
	for i := 0; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		v, _ := res[i+1].(string)
		if id == "" {
			continue // the sentinel (redis/reply.go)
		}
		r, err := parseRecord(saleID, id, v)
		if err != nil {
			return nil, fmt.Errorf("snapshot: sale=%s order=%s: %w", saleID, id, err)
		}
		snap.Reservations = append(snap.Reservations, *r)
	}
	return snap, nil
}
