// Package testenv finds the real services that integration tests talk to.
package testenv

import (
	"os"
	"testing"
)

// URL returns the value of the FLASHSALE_TEST_* variable name. When it is
// unset the test is skipped with a message naming the variable, except under
// CI (CI set), where a missing service is a failure, never a skip.
func URL(tb testing.TB, name string) string {
	tb.Helper()
	if v := os.Getenv(name); v != "" {
		shareLoad(tb)
		return v
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s is not set; CI must run every integration test", name)
	}
	tb.Skipf("set %s to run this test against a real service", name)
	return ""
}

// The variables, with the values .ci/run uses on this machine.
const (
	Redis    = "FLASHSALE_TEST_REDIS_URL"    // redis://127.0.0.1:6379
	MySQL    = "FLASHSALE_TEST_MYSQL_URL"    // mysql://root@127.0.0.1:3306/test
	Postgres = "FLASHSALE_TEST_POSTGRES_URL" // postgres://postgres@127.0.0.1:5432/test
	AMQP     = "FLASHSALE_TEST_AMQP_URL"     // amqp://guest:guest@127.0.0.1:5672/
)
