package redis

import (
	"context"
	_ "embed"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

var (
	//go:embed loaded.lua
	loadedLua    string
	loadedScript = goredis.NewScript(scriptSource(loadedLua))
)

// Missing runs loaded.lua for every sale of saleIDs in one pipeline: one
// round trip (on a Cluster, go-redis sends each master its part at once),
// where the heal loop's one Available per live sale, every tick, was one
// round trip each and read every night of the sale (issue 26). The script
// makes read.lua's checks on read.lua's keys, so a sale is missing exactly
// when Available would answer ErrNotLoaded; a stale one is unloaded and
// logged (stale) as Available does.
func (e *Engine) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	if len(saleIDs) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(saleIDs))
	seen := make(map[string]bool, len(saleIDs))
	for _, id := range saleIDs {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	cmds := make([]*goredis.Cmd, len(ids))
	send := func(which []int, source bool) error {
		_, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, i := range which {
				k := e.saleKeys(ids[i])
				keys := []string{k.meta, k.stock, k.res}
				if source {
					cmds[i] = loadedScript.Eval(ctx, p, keys)
				} else {
					cmds[i] = loadedScript.EvalSha(ctx, p, keys)
				}
			}
			return nil
		})
		return err
	}
	all := make([]int, len(ids))
	for i := range all {
		all[i] = i
	}
	if err := send(all, false); err != nil {
		// A Redis that has not run the script since it started answers
		// NOSCRIPT, and a pipeline cannot fall back as Script.Run does:
		// those go again with the source, which Redis then keeps for the
		// next tick.
		var again []int
		for i, c := range cmds {
			switch err := c.Err(); {
			case isNoScript(err):
				again = append(again, i)
			case err != nil:
				return nil, unavailable("missing: sale="+ids[i], err)
			}
		}
		if err := send(again, true); err != nil {
			return nil, unavailable("missing", err)
		}
	}
	var missing []string
	for i, c := range cmds {
		reply, err := c.Slice()
		if err != nil {
			return nil, unavailable("missing: sale="+ids[i], err)
		}
		switch code(reply) {
		case replyOK:
		case replyNotLoaded:
			missing = append(missing, ids[i])
		case replyStale:
			e.stale(ctx, ids[i])
			missing = append(missing, ids[i])
		default:
			return nil, fmt.Errorf("missing: sale=%s: unexpected script reply %v", ids[i], reply)
		}
	}
	return missing, nil
}
