package api

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/testgen"
)

// TestGraphTensorsEncoding checks the handler's path (planGraphTensors, whose answer
// leaves the per-tensor maps out, and encodeGraphTensors) against encoding/json of the
// answer planGraph gives, byte for byte.
func TestGraphTensorsEncoding(t *testing.T) {
	s := newTestServer(t, nil)
	for name, body := range graphBodies(t) {
		t.Run(name, func(t *testing.T) {
			in, err := prepareGraphKeyed(s, []byte(body))
			require.NoError(t, err)
			resp, ta, err := s.planGraphTensors(t.Context(), in)
			require.NoError(t, err)
			require.Nil(t, resp.Shardings)
			got, err := encodeGraphTensors(resp, ta)
			require.NoError(t, err)
			want, err := encodeJSON(renderGraph(t, s, body))
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

// TestGraphTensorsOrigins checks origins written straight from propagation (sub-axes,
// escapes, empty lists) against encoding/json of their explainEntries.
func TestGraphTensorsOrigins(t *testing.T) {
	sub := sharding.AxisRef{Name: "x", Pre: 2, Size: 2, Of: 8}
	whole := sharding.AxisRef{Name: "m<&>", Pre: 1, Size: 4, Of: 4}
	ta := &tensorAnswers{
		shardingIDs: []string{},
		shardings:   []ShardingJSON{},
		explainIDs:  []string{"a", "b\u2028"},
		explain: [][]propagation.Origin{
			{{Dim: 0, Axes: []sharding.AxisRef{sub, whole}, From: "x dim 0 through \"op\" (factor i)"}},
			{{Dim: 1, Axes: nil, From: ""}, {Dim: 2, Axes: []sharding.AxisRef{}, From: "\x01"}},
		},
	}
	resp := &GraphResponse{Refined: []string{}}
	got, err := encodeGraphTensors(resp, ta)
	require.NoError(t, err)
	want, err := encodeJSON(ta.fill(&GraphResponse{Refined: []string{}}))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// graphBodies are the graph requests the encoder and plan-id tests run over: API.md's
// and the tensor-parallel example, every examples/graph-*.json file, and transformer
// graphs of 1, 3 and 48 layers.
func graphBodies(t *testing.T) map[string]string {
	files, err := filepath.Glob(filepath.Join("..", "examples", "graph-*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	bodies := map[string]string{"api-graph": apiGraph, "tp-graph": tpGraph}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		bodies[filepath.Base(f)] = string(b)
	}
	for _, layers := range []int{1, 3, 48} {
		bodies[fmt.Sprintf("transformer-%d", layers)] = testgen.TransformerGraphJSON(layers)
	}
	return bodies
}
