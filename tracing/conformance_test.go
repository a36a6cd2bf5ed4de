package tracing_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/stocktest"
	"github.com/flashsale/flashsale/storetest"
)

// TestEngineConformance: the traced engine is a stock engine like any
// other, which is what stocktest exists to catch in wrappers.
func TestEngineConformance(t *testing.T) {
	tr, _ := MustOpen(t)
	stocktest.Run(t, func(testing.TB) flashsale.StockEngine { return tr.Engine(inmem.NewEngine(), "inmem") })
}

// TestStoreConformance: the traced store passes the suite every store
// passes, on SQLite.
func TestStoreConformance(t *testing.T) {
	tr, _ := MustOpen(t)
	storetest.Run(t, func(tb testing.TB) flashsale.Store { return tr.Store(mustOpenSQLite(tb), "sqlite") })
}

// TestWrapsEveryMethod: the wrappers embed the interface they wrap, so a
// method added to it later would compile and pass through untraced. This
// fails instead, until the method is traced or named here as a deliberate
// pass-through.
func TestWrapsEveryMethod(t *testing.T) {
	for _, w := range []struct {
		file, recv string
		iface      reflect.Type
		through    []string // passed through on purpose
	}{
		{"engine.go", "engine", reflect.TypeFor[flashsale.StockEngine](), []string{
			"SoldOut", // the sold-out path's lock-free, allocation-free answer
			"Shard",   // a name, computed without I/O
			"Ping",    // the readiness probe
		}},
		{"store.go", "store", reflect.TypeFor[flashsale.Store](), storePassThrough},
	} {
		declared := methodsOf(t, w.file, w.recv)
		for i := range w.iface.NumMethod() {
			name := w.iface.Method(i).Name
			if !slices.Contains(declared, name) && !slices.Contains(w.through, name) {
				t.Errorf("%s: %s.%s is not traced: wrap it in %s, or list it as a deliberate pass-through", w.file, w.iface, name, w.recv)
			}
		}
	}
}

// methodsOf lists the methods file declares on *recv.
func methodsOf(t *testing.T, file, recv string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
			continue
		}
		if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == recv {
				names = append(names, fn.Name.Name)
			}
		}
	}
	return names
}

// storePassThrough are the store methods traced nowhere: start-up, the
// readiness probe and Close.
var storePassThrough = []string{"PendingMigrations", "Ping", "Close"}
