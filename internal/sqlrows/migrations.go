package sqlrows

import (
	"io/fs"
	"slices"
	"strings"
)

// PendingMigrations returns the names (without .sql) of the migrations in
// fsys's migrations/ that applied says the database has not recorded, in
// file-name order: each store reads its own schema_migrations and says
// how a name maps to what it records.
func PendingMigrations(fsys fs.FS, applied func(name string) bool) ([]string, error) {
	files, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var pending []string
	for _, file := range files {
		if name := strings.TrimSuffix(strings.TrimPrefix(file, "migrations/"), ".sql"); !applied(name) {
			pending = append(pending, name)
		}
	}
	return pending, nil
}

// MigrationNumber is the version number a migration's name starts with
// ("0007_price_tiers" is 7), as the SQL servers record it; -1 when it
// starts with none.
func MigrationNumber(name string) int {
	n := 0
	for i, c := range name {
		if c < '0' || c > '9' {
			if i == 0 {
				return -1
			}
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
