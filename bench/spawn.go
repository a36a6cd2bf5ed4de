package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/flashsale/flashsale/internal/app"
)

// child is a process bench started, and the temporary path it leaves.
type child struct {
	cmd  *exec.Cmd
	temp string
	done chan struct{} // closed once the process has exited
}

// startChild starts cmd; the child's done closes when it exits.
func startChild(cmd *exec.Cmd, temp string) (*child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, temp: temp, done: make(chan struct{})}
	go func() { cmd.Wait(); close(c.done) }()
	return c, nil
}

func (c *child) stop() {
	c.cmd.Process.Kill()
	<-c.done
	if c.temp != "" {
		os.RemoveAll(c.temp)
	}
}

// spawnSelf runs this binary's serve in a process of its own on a free
// port with a temporary data dir and fresh secrets, and waits until it is
// ready. env(dir) is the shape's settings, after the inherited
// environment's (so they win); the data dir goes with the process.
func spawnSelf(ctx context.Context, env func(dir string) []string) (*child, string, string, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", "", "", fmt.Errorf("bench --self: %w", err)
	}
	dir, err := os.MkdirTemp("", "flashsale-bench-")
	if err != nil {
		return nil, "", "", "", fmt.Errorf("bench --self: %w", err)
	}
	addr, err := freePort()
	if err != nil {
		return nil, "", "", "", err
	}
	admin, secret := randomHex(), randomHex()
	cmd := exec.Command(exe, "serve")
	cmd.Env = append(append(os.Environ(), env(dir)...), "FLASHSALE_ADDR="+addr, "FLASHSALE_DATA_DIR="+dir,
		"FLASHSALE_ADMIN_TOKEN="+admin, "FLASHSALE_JWT_SECRET="+secret, "FLASHSALE_LOG_LEVEL=error", "FLASHSALE_METRICS_ADDR=")
	var log bytes.Buffer // the server's errors (FLASHSALE_LOG_LEVEL=error), read should it not start
	cmd.Stdout, cmd.Stderr = io.Discard, &log
	base := "http://" + addr
	c, err := serveChild(ctx, cmd, dir, base+"/readyz", http.StatusOK, &log)
	if err != nil {
		return nil, "", "", "", fmt.Errorf("bench --self: the server did not start: %w", err)
	}
	return c, base, admin, secret, nil
}

// embeddedEnv is the embedded shape in dir: SQLite there, and none of the
// distributed shape's settings the environment may hold.
func embeddedEnv(dir string) []string {
	return []string{"FLASHSALE_DATABASE_URL=" + app.SQLiteURL(dir),
		"FLASHSALE_REDIS_URL=", "FLASHSALE_AMQP_URL=", "FLASHSALE_BREAKER_MODE="}
}

// spawnCeiling builds ../shared/bench/ceiling (src) and runs it in a
// process of its own, or, when src has no main.go or the go tool is
// missing, runs this binary's copy of it as a child. It says which. A
// ceiling that exits before it answers is reported at once, with what it
// printed.
func spawnCeiling(ctx context.Context, src string) (*child, string, string, error) {
	addr, err := freePort()
	if err != nil {
		return nil, "", "", err
	}
	var cmd *exec.Cmd
	what, temp := "", ""
	if _, err := os.Stat(filepath.Join(src, "main.go")); err == nil {
		if gobin, err := exec.LookPath("go"); err == nil {
			if temp, err = os.MkdirTemp("", "flashsale-ceiling-"); err != nil {
				return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
			}
			bin := filepath.Join(temp, "ceiling")
			if out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, filepath.Join(src, "main.go")).CombinedOutput(); err != nil {
				os.RemoveAll(temp)
				return nil, "", "", fmt.Errorf("bench --ceiling: build %s: %w\n%s", src, err, out)
			}
			cmd, what = exec.Command(bin, "-addr", addr), src+" (built, own process)"
		}
	}
	if cmd == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
		}
		cmd, what = exec.Command(exe, "bench", ServeCeilingFlag, addr), "this binary's copy of the ceiling handler (own process; "+src+" not found)"
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	base := "http://" + addr
	c, err := serveChild(ctx, cmd, temp, base+"/", http.StatusConflict, &out)
	if err != nil {
		return nil, "", "", fmt.Errorf("bench --ceiling: %w", err)
	}
	return c, base, what, nil
}

// serveChild starts cmd, whose output goes to out, and waits until url
// answers want. On failure it stops the process, removes temp, and ends
// its error with the last of what the process printed (out is read only
// once the process has exited).
func serveChild(ctx context.Context, cmd *exec.Cmd, temp, url string, want int, out *bytes.Buffer) (*child, error) {
	c, err := startChild(cmd, temp)
	if err != nil {
		os.RemoveAll(temp)
		return nil, err
	}
	if err := waitHTTP(ctx, url, want, c.done); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w\n%s", err, out.Bytes()[max(0, out.Len()-2000):])
	}
	return c, nil
}

// errExited is waitHTTP's answer when the process it waits for exits first.
var errExited = errors.New("the process exited before it answered")

// waitHTTP polls url until it answers want, for up to 30 s, or until
// exited closes: then errExited.
func waitHTTP(ctx context.Context, url string, want int, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %d within 30s (last: %v)", url, want, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("%s: %w", url, errExited)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RunID tells this bench's users, files and throwaway Redis prefixes and
// queues (flashsale-bench-RUNID-...) from another's on the same services.
var RunID = sync.OnceValue(func() string { return randomHex()[:8] })
