package propagation

import (
	"context"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/require"
)

func testMesh(t testing.TB, s string) *sharding.Mesh {
	t.Helper()
	m, err := sharding.ParseMeshString(s, "mesh")
	require.NoError(t, err)
	return m
}

// builder assembles graphs tersely in tests.
type builder struct {
	t testing.TB
	m *sharding.Mesh
	g *Graph
}

func newBuilder(t testing.TB, mesh string) *builder {
	return &builder{t: t, m: testMesh(t, mesh), g: &Graph{Tensors: map[string]*Tensor{}}}
}

// tensor adds a tensor; ann is Shardy text ("" for none).
func (b *builder) tensor(name string, shape []int64, ann string) *builder {
	b.t.Helper()
	t := &Tensor{Shape: shape, ElemBits: 32}
	if ann != "" {
		s, err := sharding.ParseText(ann, b.m, shape, name)
		require.NoError(b.t, err)
		t.Sharding = &s
	}
	b.g.Tensors[name] = t
	return b
}

func (b *builder) op(name, kind string, in, out []string, attrs map[string]any) *builder {
	b.g.Ops = append(b.g.Ops, Op{Name: name, Kind: kind, Operands: in, Results: out, Attrs: attrs})
	return b
}

func (b *builder) custom(name, rule string, in, out []string) *builder {
	b.g.Ops = append(b.g.Ops, Op{Name: name, Kind: "custom", Operands: in, Results: out, Rule: rule})
	return b
}

func (b *builder) run(opts Options) *Result {
	b.t.Helper()
	res, err := Propagate(context.Background(), b.g, b.m, opts)
	require.NoError(b.t, err)
	return res
}

func s(names ...string) []string { return names }

func shape(dims ...int64) []int64 { return dims }

func matmul() map[string]any {
	return map[string]any{"lhs_contracting_dimensions": []int{1}, "rhs_contracting_dimensions": []int{0}}
}

// bodies returns the printed sharding of each named tensor.
func bodies(r *Result, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = r.Shardings[n].Body()
	}
	return out
}
