package sqlstore_test

import (
	"testing"

	"github.com/flashsale/flashsale/internal/sqlstore"
)

func TestNumbered(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"WHERE a = ? AND b = ?", "WHERE a = $1 AND b = $2"},
		{"SELECT '?', x FROM t WHERE y = ?::date", "SELECT '?', x FROM t WHERE y = $1::date"},
	} {
		if got := sqlstore.Numbered(tt.in); got != tt.want {
			t.Errorf("Numbered(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
