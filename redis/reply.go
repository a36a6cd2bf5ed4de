package redis

import (
	"strconv"
	"strings"
)

// reply is the first element of every script's reply. The one table below
// names each code for both sides: the Go that reads a reply uses the
// constants, and every script is run with the same names declared as Lua
// locals in front of it (scriptSource), so the scripts return names, not
// numbers, and one number cannot mean two things in two scripts.
type reply int64

const (
	replyOK           reply = 1  // done: reserved, released, retaken or loaded
	replyExisting     reply = 2  // reserve: the key or order id names an order already
	replySoldOut      reply = 3  // a night lacks the rooms
	replyLimit        reply = 4  // the user would exceed the sale's limit
	replyNotLoaded    reply = 5  // the sale has no stock in Redis
	replyInvalidStay  reply = 6  // the stay is outside the sale's nights, or no rooms
	replyTokenSpent   reply = 7  // reserve: the purchase token was already spent
	replyUnknownOrder reply = 8  // retake: no reservation under the order id
	replyInactive     reply = 9  // release: the reservation is not active (or unknown)
	replyStarted      reply = 10 // load: the sale is loaded and has started
	replyStagingLost  reply = 11 // load: the staged keys expired before the commit
	replyStale        reply = 12 // the sale was loaded by another Redis process: unloaded now
	replyRule         reply = 13 // reserve: a night's stay rule refuses the stay
)

// replyNames are the Lua names of the codes.
var replyNames = []struct {
	name string
	code reply
}{
	{"OK", replyOK}, {"EXISTING", replyExisting}, {"SOLD_OUT", replySoldOut},
	{"LIMIT", replyLimit}, {"NOT_LOADED", replyNotLoaded}, {"INVALID_STAY", replyInvalidStay},
	{"TOKEN_SPENT", replyTokenSpent}, {"UNKNOWN_ORDER", replyUnknownOrder},
	{"INACTIVE", replyInactive}, {"STARTED", replyStarted}, {"STAGING_LOST", replyStagingLost},
	{"STALE", replyStale}, {"RULE", replyRule},
}

// scriptSource declares every reply name as a Lua local ahead of body, and
// the function stale (below). The declarations share body's first line, so
// Redis's line numbers in an error still match the .lua file.
func scriptSource(body string) string {
	var names, codes []string
	for _, r := range replyNames {
		names = append(names, r.name)
		codes = append(codes, strconv.FormatInt(int64(r.code), 10))
	}
	return "local " + strings.Join(names, ", ") + " = " + strings.Join(codes, ", ") + "; " + staleLua + body
}

// staleLua is the fence of every script that reads or changes a sale
// (docs/design.md, "A stale Redis is never sold from"). load.lua stamps a
// sale's meta hash with the run_id of the Redis process that loaded it;
// a process restarted from a snapshot or an AOF, or a replica promoted in
// a failover, has another run_id but inherits the stamp. load.lua also
// puts a sentinel field ("", which no night, user, key or order is) in
// each of the sale's hashes, so a hash that lost its contents alone (a
// key evicted, deleted, or expired apart from the rest) is missing its
// sentinel rather than looking empty: an idempotency binding lost that way
// would let a retry take a second room, a user count lost would lift the
// limit. Either way the sale may lack writes its instances were told of,
// so it is unloaded (its meta deleted, which every reader takes for "not
// loaded") and the script answers STALE; the heal loop then rebuilds it
// behind the fence, from the database and the drained queue.
// node() is the run_id of the process running the script, asked of INFO
// once per script run (a script runs whole on one process, and INFO costs
// more than the rest of a check: loaded.lua checks a hundred sales in one
// run); loadedAt(base, hashes, fields...) checks the meta hash
// (KEYS[base+1]) and the sentinels of the hashes KEYS[base+2] ..
// KEYS[base+1+hashes], and returns the meta hash's fields (after
// 'nights', which every loaded sale has), or nil and the reply NOT_LOADED
// or STALE; loaded(hashes, fields...) is loadedAt(0, ...), a script's one
// sale.
const staleLua = `local run_id local function node() if not run_id then run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') end return run_id end ` +
	`local function stale(meta, stamp) if stamp == node() then return false end redis.call('DEL', meta) return true end ` +
	`local function loadedAt(base, hashes, ...) local meta = KEYS[base + 1] local m = redis.call('HMGET', meta, 'node', 'nights', ...) ` +
	`if not m[2] then return nil, {NOT_LOADED} end if stale(meta, m[1]) then return nil, {STALE} end ` +
	`for i = base + 2, base + 1 + hashes do if redis.call('HEXISTS', KEYS[i], '') == 0 then redis.call('DEL', meta) return nil, {STALE} end end ` +
	`table.remove(m, 1) return m end ` +
	`local function loaded(hashes, ...) return loadedAt(0, hashes, ...) end `

// code is the first element of a script reply, or 0.
func code(r []any) reply {
	if len(r) == 0 {
		return 0
	}
	n, _ := r[0].(int64)
	return reply(n)
}

// ReserveScript is reserve.lua as the engine runs it, for benchmarks that
// run the script with another client (redis-benchmark) as a ceiling.
func ReserveScript() string { return scriptSource(reserveLua) }
