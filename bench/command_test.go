package bench

import (
	"strings"
	"testing"
)

// TestBenchComparePaths: without the services' URLs the distributed
// paths are skipped, and said to be, before anything starts. (The flags
// --compare refuses are in TestBenchFlags' table.)
func TestBenchComparePaths(t *testing.T) {
	f := flags{self: true, compare: true, paths: "embedded,distributed,dbmode", databaseURL: "sqlite://x.db", redisURL: "redis://r"}
	specs, err := f.comparePaths()
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		if (sp.skip == "") != (sp.name == PathEmbedded) || sp.skip != "" && !strings.Contains(sp.skip, "--database-url (MySQL or PostgreSQL)") {
			t.Errorf("%s: skip %q", sp.name, sp.skip)
		}
	}
}
