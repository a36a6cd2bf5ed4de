package redis

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestRedisLog checks go-redis's lines arrive through slog at warn, without
// the library's own prefix.
func TestRedisLog(t *testing.T) {
	var buf bytes.Buffer
	l := redisLog{slog.New(slog.NewTextHandler(&buf, nil))}
	l.Printf(context.Background(), "redis: connection pool: %s", "failed to dial")
	got := buf.String()
	if !strings.Contains(got, "level=WARN") || !strings.Contains(got, `msg="connection pool: failed to dial"`) || !strings.Contains(got, "component=go-redis") {
		t.Fatalf("line = %q", got)
	}
	buf.Reset()
	redisLog{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))}.Printf(context.Background(), "x")
	if buf.Len() != 0 {
		t.Fatalf("below the level, got %q", buf.String())
	}
}
