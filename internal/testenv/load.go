package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// A test that checks a time bound (I5's "released within a second") is
// checking the machine as much as the code when another package's storm
// runs beside it: go test runs two packages' binaries at once on a
// two-core machine, and a transaction holding a hot row while its process
// waits for a core makes everyone behind it wait too. Alone keeps such a
// test by itself among the tests that use the real services, across
// processes, with two lock files:
//
//   - every test that uses a service (URL, StartRedis, StartRedisCluster)
//     holds the load lock shared while it runs, one flock per process
//     counted by the tests that hold it; a test heavy without a service
//     holds it through Load, and a short package of them for its whole run
//     (Share or Main, in its TestMain);
//   - Alone takes the turnstile, so no process takes the load lock anew,
//     then the load lock exclusively, once the tests already running end.
//
// A process that already holds the load lock shared keeps it for a test
// that starts meanwhile (no turnstile then): a test that asks for a second
// service halfway through would otherwise wait for Alone, which waits for
// it. The price is that Alone waits until a package's tests leave a gap,
// at most that package's run.

var load struct {
	sync.Mutex
	holders int      // tests of this process holding the load lock shared
	f       *os.File // the shared flock, while holders > 0
	alone   bool     // this process holds it exclusively (Alone)
}

func lockFile(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), name), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("test load lock: %w", err)
	}
	return f, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			if err != nil {
				return fmt.Errorf("test load lock %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}

const (
	loadLock      = "flashsale-test-load.lock"
	turnstileLock = "flashsale-test-load.turnstile"
)

// Share counts this whole test process among the loads on the services
// until it exits (which releases the flock): for a TestMain of a package
// whose tests are heavy without asking testenv for a service (storms on
// the in-process engine, SQLite, a built binary).
func Share() {
	load.Lock()
	defer load.Unlock()
	if err := share(); err != nil {
		panic(err)
	}
}

// Load counts tb among the loads a timed test waits out, until it ends:
// for a test that is heavy without asking testenv for a service (a storm
// on the in-process engine, on SQLite). Per test rather than per process
// (Share), so Alone waits for one test, not a package.
func Load(tb testing.TB) { shareLoad(tb) }

// shareLoad counts tb among the loads on the services until it ends.
func shareLoad(tb testing.TB) {
	load.Lock()
	defer load.Unlock()
	if load.alone {
		return
	}
	if err := share(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		load.Lock()
		defer load.Unlock()
		if load.holders--; load.holders == 0 {
			load.f.Close() // closing the last descriptor releases the flock
			load.f = nil
		}
	})
}

// share takes the load lock shared, through the turnstile, unless this
// process holds it already; load's mutex is held.
func share() error {
	if load.holders == 0 {
		turn, err := lockFile(turnstileLock)
		if err != nil {
			return err
		}
		defer turn.Close()
		if err := flock(turn, syscall.LOCK_EX); err != nil {
			return err
		}
		f, err := lockFile(loadLock)
		if err != nil {
			return err
		}
		if err := flock(f, syscall.LOCK_SH); err != nil {
			f.Close()
			return err
		}
		load.f = f
	}
	load.holders++
	return nil
}

// Alone makes tb the only test using the services on this machine, among
// those of this repository, until it ends: it waits for the ones running
// to end and keeps new ones waiting. For a test that checks a time bound
// (see the top of this file); call it first, before any service is asked
// for, and never from a test that already holds one.
func Alone(tb testing.TB) {
	tb.Helper()
	load.Lock()
	defer load.Unlock()
	if load.holders > 0 {
		tb.Fatal("testenv.Alone: this process's tests already use a service; call Alone first")
	}
	turn, err := lockFile(turnstileLock)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := lockFile(loadLock)
	if err != nil {
		tb.Fatal(err)
	}
	if err := errors.Join(flock(turn, syscall.LOCK_EX), flock(f, syscall.LOCK_EX)); err != nil {
		tb.Fatal(err)
	}
	load.alone = true
	tb.Cleanup(func() {
		load.Lock()
		defer load.Unlock()
		load.alone = false
		f.Close()
		turn.Close()
	})
}

// Main is a TestMain for a package whose tests are heavy without a
// service: it Shares the load, then runs the tests.
func Main(m *testing.M) {
	Share()
	os.Exit(m.Run())
}
