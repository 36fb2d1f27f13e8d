package stablehlo_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/stablehlo"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenGraph is the canonical JSON of an imported graph.
type goldenGraph struct {
	Tensors map[string]goldenTensor `json:"tensors"`
	Ops     []propagation.Op        `json:"ops"`
	Inputs  []string                `json:"inputs"`
	Outputs []string                `json:"outputs"`
	Opaque  []string                `json:"opaque"`
}

type goldenTensor struct {
	Shape    []int64 `json:"shape"`
	Bits     int     `json:"bits"`
	Sharding string  `json:"sharding,omitempty"`
}

func graphJSON(t *testing.T, imp *stablehlo.Import) string {
	t.Helper()
	g := goldenGraph{Tensors: map[string]goldenTensor{}, Ops: imp.Graph.Ops, Inputs: imp.Graph.Inputs, Outputs: imp.Graph.Outputs, Opaque: []string{}}
	for id, tn := range imp.Graph.Tensors {
		gt := goldenTensor{Shape: tn.Shape, Bits: tn.ElemBits}
		if tn.Sharding != nil {
			gt.Sharding = tn.Sharding.Body()
		}
		g.Tensors[id] = gt
	}
	for _, o := range imp.Opaque {
		g.Opaque = append(g.Opaque, o.Op+" -> "+strings.Join(o.Results, ", "))
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	require.NoError(t, enc.Encode(g))
	return b.String()
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/stablehlo -update to create it")
	assert.Equal(t, string(want), got, "golden %s differs (review, then -update)", path)
}

// TestCorpus imports every module of testdata/corpus twice, from its @pretty and its
// @generic function (the same program in the two printed forms): both must give the
// same graph, equal to the golden .graph.json; the @pretty function, propagated and
// annotated, must equal the golden .annotated.mlir.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.mlir")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		if strings.HasSuffix(f, ".annotated.mlir") {
			continue
		}
		base := strings.TrimSuffix(f, ".mlir")
		t.Run(filepath.Base(base), func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			pretty, err := stablehlo.Read(context.Background(), string(src), stablehlo.Options{Function: "pretty"})
			require.NoError(t, err)
			generic, err := stablehlo.Read(context.Background(), string(src), stablehlo.Options{Function: "generic"})
			require.NoError(t, err)
			pj := graphJSON(t, pretty)
			assert.Equal(t, pj, graphJSON(t, generic), "the pretty and generic forms import differently")
			golden(t, base+".graph.json", pj)
			res, err := propagation.Propagate(context.Background(), pretty.Graph, pretty.Mesh, propagation.DefaultOptions())
			require.NoError(t, err)
			golden(t, base+".annotated.mlir", pretty.Annotate(res.Shardings))
			// The annotated module reads back to the same graph, annotations aside.
			again, err := stablehlo.Read(context.Background(), pretty.Annotate(res.Shardings), stablehlo.Options{Function: "pretty"})
			require.NoError(t, err)
			assert.Equal(t, len(pretty.Graph.Tensors), len(again.Graph.Tensors))
			assert.Equal(t, len(pretty.Graph.Ops), len(again.Graph.Ops))
		})
	}
}

// TestJAXAttention: a JAX-style as_text() of multi-head attention (batch on "data",
// heads on "model"): everything is modelled, the heads stay on "model" through the
// softmax, and no op needs a collective.
func TestJAXAttention(t *testing.T) {
	src, err := os.ReadFile("testdata/attention_jax.mlir")
	require.NoError(t, err)
	imp, err := stablehlo.Read(context.Background(), string(src), stablehlo.Options{})
	require.NoError(t, err)
	assert.Empty(t, imp.Opaque)
	res, err := propagation.Propagate(context.Background(), imp.Graph, imp.Mesh, propagation.DefaultOptions())
	require.NoError(t, err)
	layout := func(id string) string { return res.Shardings[id].Layout().Body() }
	assert.Equal(t, `[{"data"}, {"model"}, {}, {}]`, layout("0"), "scores: batch and heads")
	assert.Equal(t, `[{"data"}, {"model"}, {}]`, layout("8"), "softmax denominator")
	assert.Equal(t, `[{"data"}, {}, {"model"}, {}]`, layout("result0"))
	assert.Empty(t, res.Reshards)
	assert.Empty(t, res.Reductions)
	golden(t, "testdata/attention_jax.annotated.mlir", imp.Annotate(res.Shardings))
}

// TestCorpusCoversSupportedOps: every op kind of the graph API is in the corpus (in both
// forms, by TestCorpus), but the short aliases that no StableHLO module prints.
func TestCorpusCoversSupportedOps(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.mlir")
	require.NoError(t, err)
	seen := map[string]bool{}
	var walk func(ops []propagation.Op)
	walk = func(ops []propagation.Op) {
		for _, o := range ops {
			seen[o.Kind] = true
			for _, r := range []*propagation.Region{o.Cond, o.Body} {
				if r != nil {
					walk(r.Ops)
				}
			}
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".annotated.mlir") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, fn := range []string{"pretty", "generic"} {
			imp, err := stablehlo.Read(context.Background(), string(src), stablehlo.Options{Function: fn})
			require.NoError(t, err)
			walk(imp.Graph.Ops)
		}
	}
	aliases := map[string]bool{"exp": true, "neg": true, "sub": true, "mul": true, "div": true, "max": true, "min": true, "pow": true}
	for _, k := range propagation.SupportedOps() {
		if !aliases[k] {
			assert.True(t, seen[k], "no corpus module has a %s op", k)
		}
	}
}
