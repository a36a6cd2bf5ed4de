package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// redisLog routes go-redis's own lines (pool and pub/sub trouble, printed
// with the standard log by default) into slog, so a deployment has one
// stream in one format. They are about a connection, not a request: warn.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if !l.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	l.log.WarnContext(ctx, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), "component", "go-redis")
}

// setLogger makes logger go-redis's. The library has one logger per
// process, so the last engine opened wins; every instance of a process
// shares one logger anyway.
func setLogger(logger *slog.Logger) {
	if logger != nil {
		goredis.SetLogger(redisLog{logger})
	}
}
