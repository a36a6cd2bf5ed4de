package redis

import (
	"context"
	_ "embed"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"
)

var (
	//go:embed loaded.lua
	loadedLua    string
	loadedScript = goredis.NewScript(scriptSource(loadedLua))
)

// loadedRun is how many sales one loaded.lua call checks on a single
// node. The heal loop asks after every live sale four times a second: one
// script call per sale made Redis's idle cost grow with the number of
// sales nobody buys (issue 26: a tenth of its core for a thousand), most
// of it the call itself and the INFO every stale check asks (node() now
// asks it once per call). A run of a hundred keeps each call well under a
// millisecond of Redis's time, so a purchase never waits long behind one.
// On a Cluster each sale is its own hash slot (its keys' tag), and a
// script may not touch two slots, so there a run is one sale: the calls
// stay one per sale, pipelined per master.
const loadedRun = 100

// Missing returns the sales of saleIDs that Available would answer
// ErrNotLoaded for: loaded.lua over them, in runs (loadedRun), all in one
// pipeline. A stale one is unloaded and logged (stale) as Available does.
func (e *Engine) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	_, missing, err := e.loaded(ctx, saleIDs, false)
	if err != nil {
		return nil, fmt.Errorf("missing: %w", err)
	}
	return missing, nil
}

// AvailableOf is Available for many sales in one pipeline, as Missing
// asks after them (loaded.lua with the units).
func (e *Engine) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	units, _, err := e.loaded(ctx, saleIDs, true)
	if err != nil {
		return nil, fmt.Errorf("available of: %w", err)
	}
	return units, nil
}

// loaded runs loaded.lua over saleIDs, each once, and returns the loaded
// sales' units (with withUnits; nil without) and the missing sales, in the
// order of saleIDs.
func (e *Engine) loaded(ctx context.Context, saleIDs []string, withUnits bool) (map[string][]int, []string, error) {
	if len(saleIDs) == 0 {
		return nil, nil, nil
	}
	ids := make([]string, 0, len(saleIDs))
	seen := make(map[string]bool, len(saleIDs))
	for _, id := range saleIDs {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	run := loadedRun
	if _, cluster := e.client.(*goredis.ClusterClient); cluster {
		run = 1
	}
	runs := slices.Collect(slices.Chunk(ids, run))
	flag := "0"
	if withUnits {
		flag = "1"
	}
	cmds := make([]*goredis.Cmd, len(runs))
	send := func(which []int, source bool) error {
		_, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, i := range which {
				keys := make([]string, 0, 3*len(runs[i]))
				for _, id := range runs[i] {
					k := e.saleKeys(id)
					keys = append(keys, k.meta, k.stock, k.res)
				}
				if source {
					cmds[i] = loadedScript.Eval(ctx, p, keys, flag)
				} else {
					cmds[i] = loadedScript.EvalSha(ctx, p, keys, flag)
				}
			}
			return nil
		})
		return err
	}
	all := make([]int, len(runs))
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
				return nil, nil, unavailable("sale="+runs[i][0], err)
			}
		}
		if err := send(again, true); err != nil {
			return nil, nil, unavailable(fmt.Sprintf("%d sales", len(ids)), err)
		}
	}
	var units map[string][]int
	if withUnits {
		units = make(map[string][]int, len(ids))
	}
	var missing []string
	for i, c := range cmds {
		replies, err := c.Slice()
		if err != nil {
			return nil, nil, unavailable("sale="+runs[i][0], err)
		}
		if len(replies) != len(runs[i]) {
			return nil, nil, fmt.Errorf("sale=%s: %d script replies for %d sales", runs[i][0], len(replies), len(runs[i]))
		}
		for j, r := range replies {
			id := runs[i][j]
			reply, _ := r.([]any)
			switch code(reply) {
			case replyOK:
				if !withUnits {
					continue
				}
				if len(reply) != 3 {
					return nil, nil, fmt.Errorf("sale=%s: unexpected script reply %v", id, reply)
				}
				n, _ := reply[1].(int64)
				stock, _ := reply[2].([]any)
				if units[id], err = unitsOf(id, n, stock); err != nil {
					return nil, nil, err
				}
			case replyNotLoaded:
				missing = append(missing, id)
			case replyStale:
				e.stale(ctx, id)
				missing = append(missing, id)
			default:
				return nil, nil, fmt.Errorf("sale=%s: unexpected script reply %v", id, reply)
			}
		}
	}
	return units, missing, nil
}
