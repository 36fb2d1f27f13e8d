package propagation

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/require"
)

// randomGraph builds a seeded random DAG of elementwise, dot_general, transpose,
// reshape, broadcast_in_dim and reduce ops with random annotations.
func randomGraph(t testing.TB, rng *rand.Rand, m *sharding.Mesh, nOps int) *Graph {
	g := &Graph{Tensors: map[string]*Tensor{}}
	var names []string
	sizes := []int64{2, 4, 6, 8, 16}
	newTensor := func(shape []int64) string {
		name := fmt.Sprintf("t%d", len(g.Tensors))
		g.Tensors[name] = &Tensor{Shape: shape, ElemBits: 32}
		if rng.IntN(3) == 0 {
			g.Tensors[name].Sharding = randomSharding(t, rng, m, shape)
		}
		names = append(names, name)
		return name
	}
	randShape := func() []int64 {
		s := make([]int64, 1+rng.IntN(3))
		for i := range s {
			s[i] = sizes[rng.IntN(len(sizes))]
		}
		return s
	}
	for range 2 {
		newTensor(randShape())
	}
	for i := 0; len(g.Ops) < nOps && i < nOps*4; i++ {
		in := names[rng.IntN(len(names))]
		sh := g.Tensors[in].Shape
		name := fmt.Sprintf("op%d", len(g.Ops))
		add := func(kind string, ins []string, out []int64, attrs map[string]any) {
			o := newTensor(out)
			g.Ops = append(g.Ops, Op{Name: name, Kind: kind, Operands: ins, Results: []string{o}, Attrs: attrs})
		}
		switch rng.IntN(7) {
		case 0: // unary
			add([]string{"tanh", "negate", "exponential"}[rng.IntN(3)], []string{in}, sh, nil)
		case 1: // binary with a same-shaped tensor (or itself)
			other := in
			for _, n := range names {
				if n != in && equalShape(g.Tensors[n].Shape, sh) && rng.IntN(2) == 0 {
					other = n
					break
				}
			}
			add([]string{"add", "multiply", "maximum"}[rng.IntN(3)], []string{in, other}, sh, nil)
		case 2: // dot with a fresh weight
			k := len(sh) - 1
			n := sizes[rng.IntN(len(sizes))]
			w := newTensor([]int64{sh[k], n})
			out := append(append([]int64{}, sh[:k]...), n)
			add("dot_general", []string{in, w}, out, map[string]any{"lhs_contracting_dimensions": []int{k}, "rhs_contracting_dimensions": []int{0}})
		case 3: // transpose
			perm := rng.Perm(len(sh))
			out := make([]int64, len(sh))
			for d, p := range perm {
				out[d] = sh[p]
			}
			add("transpose", []string{in}, out, map[string]any{"permutation": perm})
		case 4: // reshape: merge two dims or split one
			if len(sh) >= 2 && rng.IntN(2) == 0 {
				d := rng.IntN(len(sh) - 1)
				out := append(append(append([]int64{}, sh[:d]...), sh[d]*sh[d+1]), sh[d+2:]...)
				add("reshape", []string{in}, out, nil)
			} else {
				d := rng.IntN(len(sh))
				if sh[d]%2 != 0 {
					continue
				}
				out := append(append(append([]int64{}, sh[:d]...), 2, sh[d]/2), sh[d+1:]...)
				add("reshape", []string{in}, out, nil)
			}
		case 5: // broadcast a new leading dim
			if len(sh) >= 4 {
				continue
			}
			dims := make([]int, len(sh))
			for i := range dims {
				dims[i] = i + 1
			}
			add("broadcast_in_dim", []string{in}, append([]int64{sizes[rng.IntN(len(sizes))]}, sh...), map[string]any{"broadcast_dimensions": dims})
		case 6: // reduce one dim
			if len(sh) < 2 {
				continue
			}
			d := rng.IntN(len(sh))
			out := append(append([]int64{}, sh[:d]...), sh[d+1:]...)
			add("reduce", []string{in}, out, map[string]any{"dimensions": []int{d}})
		}
	}
	return g
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// randomSharding draws a valid annotation: each mesh axis at most once, on a random dim
// or explicitly replicated, random open/closed dims and occasional priorities.
func randomSharding(t testing.TB, rng *rand.Rand, m *sharding.Mesh, shape []int64) *sharding.Sharding {
	dims := make([][]string, len(shape))
	var replicated []string
	for _, a := range m.Axes {
		switch r := rng.IntN(6); {
		case r < 2 && len(shape) > 0:
			d := rng.IntN(len(shape))
			dims[d] = append(dims[d], `"`+a.Name+`"`)
		case r == 2:
			replicated = append(replicated, `"`+a.Name+`"`)
		}
	}
	var b strings.Builder
	b.WriteByte('[')
	for d := range shape {
		if d > 0 {
			b.WriteString(", ")
		}
		b.WriteString("{" + strings.Join(dims[d], ", "))
		if rng.IntN(2) == 0 {
			if len(dims[d]) > 0 {
				b.WriteString(", ")
			}
			b.WriteString("?")
			b.WriteString("}")
		} else {
			b.WriteString("}")
			if len(dims[d]) == 0 {
				continue // an empty closed dim cannot carry a priority
			}
		}
		if p := rng.IntN(5); p < 3 {
			fmt.Fprintf(&b, "p%d", p)
		}
	}
	b.WriteByte(']')
	if len(replicated) > 0 {
		b.WriteString(", replicated={" + strings.Join(replicated, ", ") + "}")
	}
	s, err := sharding.ParseText(b.String(), m, shape, "ann")
	require.NoError(t, err, b.String())
	return &s
}
