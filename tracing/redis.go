package tracing

import (
	"context"
	"errors"
	"net"

	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// RedisHook is a go-redis hook that makes each command (and each
// pipeline) sent on behalf of a traced call a client span, "redis
// <command>", with db.system.name redis and the command's name; never its
// arguments, which hold user ids and purchase tokens. Commands of the
// background loops (the sold-out subscriber, the lazy writer, the heal
// loop) carry no span and make none. Off, it returns nil: add nothing.
func (t *Tracing) RedisHook() goredis.Hook {
	if t == nil {
		return nil
	}
	return redisHook{t: t}
}

type redisHook struct{ t *Tracing }

var _ goredis.Hook = redisHook{}

func (h redisHook) DialHook(next goredis.DialHook) goredis.DialHook {
	return next // a dial belongs to the pool, not to the call that waited for it
}

func (h redisHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		name := cmd.Name()
		ctx, span := h.t.start(ctx, "redis "+name, trace.SpanKindClient, semconv.DBSystemNameRedis, semconv.DBOperationName(name))
		err := next(ctx, cmd)
		endRedis(span, err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		ctx, span := h.t.start(ctx, "redis pipeline", trace.SpanKindClient, semconv.DBSystemNameRedis,
			semconv.DBOperationName("pipeline"), semconv.DBOperationBatchSize(len(cmds)))
		err := next(ctx, cmds)
		endRedis(span, err)
		return err
	}
}

// endRedis ends a command's span: redis.Nil (no such key) is an answer,
// a network error or a Redis error reply is a failure.
func endRedis(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !errors.Is(err, goredis.Nil) {
		var ne net.Error
		if errors.As(err, &ne) {
			span.SetAttributes(semconv.ErrorTypeKey.String("network"))
		}
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
