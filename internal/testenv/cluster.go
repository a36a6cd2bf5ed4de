package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster of a test's own: masters with replicas
// each, on free ports, with a short cluster-node-timeout so a failover
// takes seconds, and cluster-require-full-coverage off as the README asks
// (so the other masters serve while one shard fails over). Nodes can be
// stopped (SIGSTOP), resumed and killed, so a replica can miss writes and
// then be promoted.
type RedisCluster struct {
	tb       testing.TB
	nodes    map[string]*exec.Cmd // by address
	addrs    []string
	replicas int // per master
}

// StartRedisCluster starts masters × (1 + replicas) nodes and joins them;
// they are killed when the test ends. Without redis-server the test is
// skipped (failed under CI=true).
func StartRedisCluster(tb testing.TB, masters, replicas int, nodeTimeout time.Duration) *RedisCluster {
	tb.Helper()
	requireRedisServer(tb)
	shareLoad(tb)
	dir := tb.TempDir()
	c := &RedisCluster{tb: tb, nodes: map[string]*exec.Cmd{}, replicas: replicas}
	for range masters * (1 + replicas) {
		port := freeClusterPort(tb)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("%s/nodes-%d.conf", dir, port),
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
			"--cluster-require-full-coverage", "no",
			"--save", "", "--appendonly", "no", "--dir", dir, "--dbfilename", fmt.Sprintf("dump-%d.rdb", port))
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start redis-server: %v", err)
		}
		c.nodes[addr] = cmd
		c.addrs = append(c.addrs, addr)
		tb.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Kill()
			cmd.Wait()
		})
		waitListen(tb, addr)
	}
	args := append([]string{"--cluster", "create"}, c.addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK(30 * time.Second)
	return c
}

// URL is the seed list the instances take: every node.
func (c *RedisCluster) URL() string { return "redis://" + strings.Join(c.addrs, ",") }

// Shard returns the addresses of the master and the replicas serving the
// slot of key (a hash tag such as "{sale id}" is enough), once the master
// lists as many replicas as the cluster was started with (they join a
// moment after cluster_state:ok).
func (c *RedisCluster) Shard(key string) (master string, replicas []string) {
	c.tb.Helper()
	if !Poll(20*time.Second, 100*time.Millisecond, func() bool {
		master, replicas = c.shard(key)
		return master != "" && len(replicas) >= c.replicas
	}) {
		c.tb.Fatalf("the slot of %q: master %q, replicas %v", key, master, replicas)
	}
	return master, replicas
}

func (c *RedisCluster) shard(key string) (master string, replicas []string) {
	ctx := context.Background()
	for _, addr := range c.addrs {
		rc := goredis.NewClient(&goredis.Options{Addr: addr})
		slot, err := rc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			rc.Close()
			continue
		}
		shards, err := rc.ClusterShards(ctx).Result()
		rc.Close()
		if err != nil {
			continue
		}
		for _, s := range shards {
			if !hasSlot(s.Slots, slot) {
				continue
			}
			master, replicas = "", nil
			for _, n := range s.Nodes {
				addr := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				switch {
				case n.Role == "master":
					master = addr
				case n.Health == "online":
					// As in CLUSTER SLOTS: not a failed replica, nor one
					// still loading its first sync ("loading").
					replicas = append(replicas, addr)
				}
			}
			if master != "" {
				return master, replicas
			}
		}
	}
	return "", nil
}

// hasSlot reports whether slot is in one of ranges.
func hasSlot(ranges []goredis.SlotRange, slot int64) bool {
	for _, r := range ranges {
		if r.Start <= slot && slot <= r.End {
			return true
		}
	}
	return false
}

// Signal sends sig to the node at addr (SIGSTOP, SIGCONT, SIGKILL).
func (c *RedisCluster) Signal(addr string, sig syscall.Signal) {
	c.tb.Helper()
	cmd, ok := c.nodes[addr]
	if !ok {
		c.tb.Fatalf("no cluster node at %s", addr)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		c.tb.Errorf("signal %v to %s: %v", sig, addr, err)
	}
	if sig == syscall.SIGKILL {
		cmd.Wait() // WaitOK leaves out a node that has exited
	}
}

// CutReplicas closes the replication links of the master at addr: a
// replica that cannot reconnect (stopped) then misses every later write.
func (c *RedisCluster) CutReplicas(addr string) {
	c.tb.Helper()
	rc := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rc.Close()
	if err := rc.Do(context.Background(), "client", "kill", "type", "replica").Err(); err != nil {
		c.tb.Errorf("CLIENT KILL TYPE replica on %s: %v", addr, err)
	}
}

// WaitOK waits until every live node says cluster_state:ok and they agree
// on the masters.
func (c *RedisCluster) WaitOK(within time.Duration) {
	c.tb.Helper()
	if !Poll(within, 100*time.Millisecond, c.ok) {
		c.tb.Fatalf("the cluster is not ok after %v", within)
	}
}

// ok reports whether every live node says cluster_state:ok.
func (c *RedisCluster) ok() bool {
	for addr, cmd := range c.nodes {
		if cmd.ProcessState != nil {
			continue
		}
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
		if err != nil || !strings.Contains(string(out), "cluster_state:ok") {
			return false
		}
	}
	return true
}

// Role is "master" or "slave" for the node at addr, "" if it does not answer.
func (c *RedisCluster) Role(addr string) string {
	rc := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rc.Close()
	info, err := rc.Info(context.Background(), "replication").Result()
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v
		}
	}
	return ""
}

func requireRedisServer(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("redis-server is not on PATH")
		}
		tb.Skip("redis-server is not on PATH")
	}
}

func waitListen(tb testing.TB, addr string) {
	tb.Helper()
	var err error
	if !Poll(10*time.Second, 10*time.Millisecond, func() bool {
		var conn net.Conn
		if conn, err = net.Dial("tcp", addr); err == nil {
			conn.Close()
		}
		return err == nil
	}) {
		tb.Fatalf("redis-server on %s does not listen: %v", addr, err)
	}
}

// freeClusterPort returns a port that is free along with its cluster bus
// port (port + 10000).
func freeClusterPort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		port := FreePort(tb)
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return port
	}
	tb.Fatal("no free port pair for a cluster node")
	return 0
}
