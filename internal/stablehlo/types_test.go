package stablehlo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/stablehlo"
)

// TestNegativeDims: a tensor type with a negative dim, wherever it stands (an argument,
// a result type, after a dynamic dim), is refused with its line and column; zero and
// dynamic dims are types like any other.
func TestNegativeDims(t *testing.T) {
	module := func(arg string) string {
		return "func.func @main(%a: " + arg + ") -> " + arg + " {\n  return %a : " + arg + "\n}\n"
	}
	cases := []struct {
		name, src, want string
	}{
		{"argument", module("tensor<-2xf32>"), "line 1, column 28: tensor dimension -2 is negative"},
		{"second dim", module("tensor<4x-16xf32>"), "line 1, column 30: tensor dimension -16 is negative"},
		{"after a dynamic dim", module("tensor<?x-1xbf16>"), "line 1, column 30: tensor dimension -1 is negative"},
		{"spaced", module("tensor< -3xf32>"), "line 1, column 29: tensor dimension -3 is negative"},
		{"op result", "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.negate %a : (tensor<4xf32>) -> tensor<-4xf32>\n  return %a : tensor<4xf32>\n}\n",
			"line 2, column 56: tensor dimension -4 is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stablehlo.Parse(context.Background(), tc.src, stablehlo.Limits{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	for _, ok := range []string{"tensor<0xf32>", "tensor<?x4xf32>", "tensor<2x0x3xf32>", "tensor<4x!quant.uniform<i8:f32, 0.5:-128>>"} {
		t.Run(ok, func(t *testing.T) {
			_, err := stablehlo.Parse(context.Background(), module(ok), stablehlo.Limits{})
			assert.NoError(t, err)
		})
	}
}
