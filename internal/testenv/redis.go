package testenv

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

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

// RedisServer is a redis-server of a test's own, without persistence
// unless the test asks, that the test may kill -9 and start again on the
// same port: a Redis lost as in production, without touching the shared
// one. It comes back empty, or from what its directory holds (a SAVE's
// dump, an AOF) when the test gave it persistence or saved.
type RedisServer struct {
	tb   testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	tls  bool // TLS only: no plain port (StartRedisTLS)
}

// StartRedis starts a redis-server on a free port, with args after the
// defaults (--save "" --appendonly no); it is killed when the test ends.
// Without redis-server on PATH the test is skipped (failed under CI=true).
func StartRedis(tb testing.TB, args ...string) *RedisServer {
	tb.Helper()
	requireRedisServer(tb)
	shareLoad(tb)
	s := &RedisServer{tb: tb, port: FreePort(tb), dir: tb.TempDir(), args: args}
	s.Start()
	tb.Cleanup(s.Kill)
	return s
}

// Dir is the server's working directory: its dump and its AOF.
func (s *RedisServer) Dir() string { return s.dir }

// URL is the server's redis:// URL, or rediss://localhost:PORT with TLS
// (the name its certificate is for).
func (s *RedisServer) URL() string {
	if s.tls {
		return "rediss://localhost:" + strconv.Itoa(s.port)
	}
	return "redis://127.0.0.1:" + strconv.Itoa(s.port)
}

// StartRedisTLS is StartRedis speaking TLS only (--port 0, --tls-port),
// with a certificate for localhost and 127.0.0.1 from a CA made for the
// test; caFile is that CA's PEM, for a client's trust (a child process
// reads it through SSL_CERT_FILE).
func StartRedisTLS(tb testing.TB, args ...string) (s *RedisServer, caFile string) {
	tb.Helper()
	requireRedisServer(tb)
	shareLoad(tb)
	dir := tb.TempDir()
	ca, cert, key := writeTestCerts(tb, dir)
	port := FreePort(tb)
	s = &RedisServer{tb: tb, port: port, dir: dir, tls: true, args: append([]string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no"}, args...)}
	s.Start()
	tb.Cleanup(s.Kill)
	return s, ca
}

// Start (re)starts the server and waits until it answers: empty, or from
// its directory's dump or AOF.
func (s *RedisServer) Start() {
	s.tb.Helper()
	s.cmd = exec.Command("redis-server", append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir}, s.args...)...)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	waitListen(s.tb, "127.0.0.1:"+strconv.Itoa(s.port))
}

// Kill kills the server with SIGKILL: everything in it is lost.
func (s *RedisServer) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}
