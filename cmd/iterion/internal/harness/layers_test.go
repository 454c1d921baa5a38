package harness

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers places every non-test file of the package: a file may use the
// names of its own layer's files and of the layers below, never above.
// Each scenario is a layer of its own, so that none reaches into another.
var layers = []struct {
	name  string
	files []string
}{
	{"errors", []string{"errors.go"}},
	{"plumbing", []string{"proc.go", "forwarder.go", "clients.go", "clock_clients.go", "replica_logs.go"}},
	{"statistics", []string{"measure.go"}},
	{"cluster", []string{"cluster.go", "cluster_clock.go"}},
	{"population", []string{"population.go"}},
	// A handover in a measuring window, which the cost, scale and clock
	// scenarios measure again.
	{"handovers", []string{"handover.go"}},
	{"cost scenario", []string{"cost.go"}},
	{"budget scenario", []string{"budget.go"}},
	{"takeover scenario", []string{"takeover.go"}},
	{"fault scenario", []string{"faults.go"}},
	// The clock scenario is the scale scenario on GitHub's clock: it seeds
	// and authenticates as the scale scenario does.
	{"scale scenario", []string{"scale.go", "clock.go", "clock_figures.go"}},
	{"load scenario", []string{"load.go", "load_slow.go", "load_webhooks.go", "load_runs.go"}},
	{"group scenario", []string{"group.go", "group_terms.go"}},
	{"tenants scenario", []string{"tenants.go", "tenants_log.go", "tenants_seed.go", "tenants_seed_store.go"}},
	{"options", []string{"options.go"}},
	{"report", []string{"report.go", "report_clock.go", "tenants_report.go"}},
	{"run", []string{"harness.go"}},
}

// scenarioLayers are the layers that must not refer to one another, though
// the list above orders them.
var scenarioLayers = []string{"cost scenario", "budget scenario", "takeover scenario", "fault scenario", "scale scenario", "load scenario", "group scenario", "tenants scenario"}

// TestLayersReferOnlyDown: no file uses a package-level name declared in a
// layer above its own, and no scenario uses another's names, so the
// plumbing and the cluster read without the scenarios and a scenario
// without the report. Methods are declared in their receiver type's layer,
// so that no lower file reaches a higher one through a method either.
func TestLayersReferOnlyDown(t *testing.T) {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, f := range l.files {
			layerOf[f] = i
		}
	}
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	declaredIn := map[string]string{} // package-level name -> its file
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		if _, ok := layerOf[p]; !ok {
			t.Errorf("%s is in no layer: place every file of the package in layers", p)
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declaredIn[d.Name.Name] = p
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declaredIn[s.Name.Name] = p
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declaredIn[n.Name] = p
						}
					}
				}
			}
		}
	}
	for p, f := range files {
		from := layerOf[p]
		// The parser resolves names declared in the file itself; the
		// unresolved ones are the package's other files' and the universe's.
		for _, id := range f.Unresolved {
			q, ok := declaredIn[id.Name]
			if !ok || q == p {
				continue
			}
			to := layerOf[q]
			sideways := to != from && slices.Contains(scenarioLayers, layers[from].name) && slices.Contains(scenarioLayers, layers[to].name)
			if to > from || sideways {
				t.Errorf("%s (%s) uses %s from %s (%s) at %v, want only its own layer's and lower layers' names: the layers refer only down",
					p, layers[from].name, id.Name, q, layers[to].name, fset.Position(id.Pos()))
			}
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if g, ok := typ.(*ast.IndexExpr); ok { // a generic type's method
				typ = g.X
			}
			if id, ok := typ.(*ast.Ident); ok && layerOf[declaredIn[id.Name]] != from {
				t.Errorf("%s (%s) declares method %s of %s, which %s declares, want it in its type's layer: a method in a higher layer would let a lower one call up",
					p, layers[from].name, fd.Name.Name, id.Name, declaredIn[id.Name])
			}
		}
	}
}
