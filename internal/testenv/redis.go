package testenv

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// DeleteKeys removes every key under prefix on the Redis at url: a test's
// own keys, never anyone else's (tests never flush a shared Redis).
func DeleteKeys(url, prefix string) error {
	o, err := goredis.ParseURL(url)
	if err != nil {
		return err
	}
	rc := goredis.NewClient(o)
	defer rc.Close()
	ctx := context.Background()
	iter := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			if err := rc.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := rc.Unlink(ctx, batch...).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
