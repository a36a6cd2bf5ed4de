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
}

// scriptSource declares every reply name as a Lua local ahead of body.
// The declarations share body's first line, so Redis's line numbers in an
// error still match the .lua file.
func scriptSource(body string) string {
	var names, codes []string
	for _, r := range replyNames {
		names = append(names, r.name)
		codes = append(codes, strconv.FormatInt(int64(r.code), 10))
	}
	return "local " + strings.Join(names, ", ") + " = " + strings.Join(codes, ", ") + "; " + body
}

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
