package stablehlo_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/stablehlo"
)

var lineColRE = regexp.MustCompile(`^line \d+, column \d+: `)

// FuzzRead: any text either imports or fails with field errors on module, function or
// mesh (a module error naming its line and column); it never panics, and an import
// propagates and annotates without panicking.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.mlir")
	more, _ := filepath.Glob("testdata/corpus/*.mlir")
	for _, p := range append(files, more...) {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"", "}", "{", "%", "#", "func.func @main() {", `"a"(`, "sdy.mesh @m = <[\"x\"=0]>",
		"func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n %0:3 = stablehlo.add %a, %a : tensor<4xf32>\n return %0#1 : tensor<4xf32>\n}",
		"func.func @main(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {\n return %a : tensor<?x4xf32>\n}",
		"func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n %0 = call @f(%a) : (tensor<4xf32>) -> tensor<4xf32>\n return %0 : tensor<4xf32>\n}",
		"func.func @main() {\n %0 = stablehlo.constant {a = [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]} dense<1> : tensor<i32>\n}",
	} {
		f.Add(s)
	}
	lim := stablehlo.Limits{MaxDepth: 16, MaxOps: 2000, MaxDevices: 256, MaxMeshAxes: 4}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 1<<16 {
			return
		}
		mesh, _ := sharding.ParseMeshString("x=2,y=2", "mesh")
		for _, m := range []*sharding.Mesh{nil, mesh} {
			imp, err := stablehlo.Read(context.Background(), src, stablehlo.Options{Mesh: m, Limits: lim})
			if err != nil {
				es, ok := sharding.AsFieldErrors(err)
				if !ok || len(es) == 0 {
					t.Fatalf("error without field errors: %v", err)
				}
				for _, e := range es {
					switch e.Field {
					case stablehlo.Field:
						if !lineColRE.MatchString(e.Message) {
							t.Fatalf("module error without line and column: %q", e.Message)
						}
					case "function", "mesh":
					default:
						t.Fatalf("error on field %q: %v", e.Field, e)
					}
				}
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			res, err := propagation.Propagate(ctx, imp.Graph, imp.Mesh, propagation.DefaultOptions())
			cancel()
			if err != nil {
				_ = imp.Locate(err)
				continue
			}
			// Parse, print, parse: the annotated module imports to the same graph, with
			// the propagated shardings as its annotations.
			out := imp.Annotate(res.Shardings)
			again, err := stablehlo.Read(context.Background(), out, stablehlo.Options{Function: imp.Func.Name, Mesh: m, Limits: lim})
			if err != nil {
				t.Fatalf("the annotated module does not read back: %v\n%s", err, out)
			}
			if len(again.Graph.Tensors) != len(imp.Graph.Tensors) || len(again.Graph.Ops) != len(imp.Graph.Ops) {
				t.Fatalf("the annotated module reads back with %d tensors and %d ops, not %d and %d\n%s",
					len(again.Graph.Tensors), len(again.Graph.Ops), len(imp.Graph.Tensors), len(imp.Graph.Ops), out)
			}
		}
	})
}
