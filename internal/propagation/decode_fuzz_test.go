package propagation

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardplan/shardplan/internal/sharding"
)

// FuzzDecodePropagate: any body either fails Decode or Propagate with field errors, or
// propagates to shardings that satisfy every invariant and are a fixpoint.
func FuzzDecodePropagate(f *testing.F) {
	m, err := sharding.ParseMeshString("x=2,y=2", "mesh")
	if err != nil {
		f.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "graph-*.json"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"tensors": {"a": {"shape": [4, 6], "sharding": ["x", null]}, "b": {"shape": [6, 4]}, "c": {"shape": [4, 4]}},
		  "ops": [{"name": "mm", "op": "dot_general", "operands": ["a", "b"], "results": ["c"], "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}]}`,
		`{"tensors": {"a": {"shape": [8], "sharding": "[{\"x\", \"y\"}]"}, "b": {"shape": [2, 4]}}, "ops": [{"name": "r", "op": "reshape", "operands": ["a"], "results": ["b"]}]}`,
		`{"tensors": {"a": {"shape": [4, 4]}, "b": {"shape": [4, 4], "sharding": {"dims": [{"axes": ["y"], "open": true, "priority": 1}, {"axes": []}]}}}, "ops": [{"name": "e", "op": "einsum", "operands": ["a"], "results": ["b"], "attrs": {"equation": "ij->ji"}}]}`,
		`{"tensors": {"a": {"shape": [4]}}, "ops": [{"name": "a", "op": "iota", "operands": [], "results": ["a"], "attrs": {"iota_dimension": 0}}], "options": {"conflict_resolution": "basic"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, opts, err := Decode(data, m)
		if err != nil {
			if _, ok := sharding.AsFieldErrors(err); !ok {
				t.Fatalf("Decode error %v (%T) is not a field error", err, err)
			}
			return
		}
		if g.NumOps() > 64 || len(g.Tensors) > 128 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := Propagate(ctx, g, m, opts)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("propagation did not finish: %v", err)
			}
			if _, ok := sharding.AsFieldErrors(err); !ok {
				t.Fatalf("Propagate error %v (%T) is not a field error", err, err)
			}
			return
		}
		for id, s := range res.Shardings {
			if err := s.Validate(m, g.Tensors[id].Shape, id); err != nil {
				t.Fatalf("tensor %s: %v", id, err)
			}
		}
		// Feeding the result back as the annotations changes nothing.
		g2 := &Graph{Tensors: map[string]*Tensor{}, Ops: g.Ops, Inputs: g.Inputs, Outputs: g.Outputs}
		for id, tn := range g.Tensors {
			s := res.Shardings[id]
			g2.Tensors[id] = &Tensor{Shape: tn.Shape, ElemBits: tn.ElemBits, Sharding: &s}
		}
		res2, err := Propagate(ctx, g2, m, opts)
		if err != nil {
			t.Fatalf("second propagation: %v", err)
		}
		for id, s := range res.Shardings {
			if !s.Equal(res2.Shardings[id]) {
				t.Fatalf("not a fixpoint at %s: %s then %s", id, s.Body(), res2.Shardings[id].Body())
			}
		}
	})
}
