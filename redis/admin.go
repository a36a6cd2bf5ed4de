package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DeletePrefix removes every key under prefix from the Redis url names (one
// node or a Cluster's seed list): what an engine opened with that prefix
// left behind, once nothing uses it (a benchmark's throwaway deployment).
// It unlinks a thousand keys a round trip: a loaded run leaves hundreds of
// thousands, and one UNLINK each outran any timeout.
func DeletePrefix(ctx context.Context, url, prefix string) error {
	client, err := newClient(url, Options{Timeout: 3 * time.Second})
	if err != nil {
		return err
	}
	defer client.Close()
	del := func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 1000 {
				if err := c.Unlink(ctx, batch...).Err(); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(batch) > 0 {
			return c.Unlink(ctx, batch...).Err()
		}
		return nil
	}
	switch c := client.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *goredis.Client:
		return del(ctx, c)
	}
	return nil
}
