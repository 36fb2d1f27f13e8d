package stablehlo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/internal/stablehlo"
)

// mlpModule prints an n-layer MLP (dot_general, add, maximum per layer) in the pretty or
// generic form.
func mlpModule(layers int, generic bool) string {
	var b strings.Builder
	b.WriteString("sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n")
	b.WriteString("func.func @main(%arg0: tensor<32x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, {}]>}, %w: tensor<256x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"model\"}]>}) -> tensor<32x256xf32> {\n")
	b.WriteString("  %cst = stablehlo.constant dense<0.000000e+00> : tensor<32x256xf32>\n")
	prev := "%arg0"
	for i := range layers {
		d, a, r := fmt.Sprintf("%%d%d", i), fmt.Sprintf("%%a%d", i), fmt.Sprintf("%%r%d", i)
		if generic {
			fmt.Fprintf(&b, "  %s = \"stablehlo.dot_general\"(%s, %%w) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<32x256xf32>, tensor<256x256xf32>) -> tensor<32x256xf32> loc(#loc1)\n", d, prev)
			fmt.Fprintf(&b, "  %s = \"stablehlo.add\"(%s, %s) : (tensor<32x256xf32>, tensor<32x256xf32>) -> tensor<32x256xf32>\n", a, d, prev)
			fmt.Fprintf(&b, "  %s = \"stablehlo.maximum\"(%s, %%cst) : (tensor<32x256xf32>, tensor<32x256xf32>) -> tensor<32x256xf32>\n", r, a)
		} else {
			fmt.Fprintf(&b, "  %s = stablehlo.dot_general %s, %%w, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x256xf32>, tensor<256x256xf32>) -> tensor<32x256xf32> loc(#loc1)\n", d, prev)
			fmt.Fprintf(&b, "  %s = stablehlo.add %s, %s : tensor<32x256xf32>\n", a, d, prev)
			fmt.Fprintf(&b, "  %s = stablehlo.maximum %s, %%cst : tensor<32x256xf32>\n", r, a)
		}
		prev = r
	}
	fmt.Fprintf(&b, "  return %s : tensor<32x256xf32>\n}\n#loc1 = loc(\"mlp.py\":1:0)\n", prev)
	return b.String()
}

// BenchmarkRead parses and imports n-layer MLP modules (3 ops a layer) in both forms.
func BenchmarkRead(b *testing.B) {
	for _, layers := range []int{10, 1000, 10000} {
		for _, generic := range []bool{false, true} {
			form := map[bool]string{false: "pretty", true: "generic"}[generic]
			src := mlpModule(layers, generic)
			b.Run(fmt.Sprintf("ops=%d/%s", 3*layers, form), func(b *testing.B) {
				imp, err := stablehlo.Read(context.Background(), src, stablehlo.Options{})
				if err != nil || len(imp.Graph.Ops) != 3*layers+2 {
					b.Fatalf("import: %v", err)
				}
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if _, err := stablehlo.Read(context.Background(), src, stablehlo.Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
