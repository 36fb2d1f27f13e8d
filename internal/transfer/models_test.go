package transfer

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"testing"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/testgen"
)

// long runs the heavy cases too (the 70B model's replay).
var long = flag.Bool("long", false, "run the heavy transfer cases (Llama 3 70B's replay)")

// modelProblem is a transfer of tensors on an h100 fabric of n devices from srcMesh at
// srcFirst to replicas of tgtMesh at tgtFirst[r].
func modelProblem(t testing.TB, n int, srcMesh string, srcFirst int, tgtMesh string, tgtFirst []int, tensors []testgen.ModelTensor) *Problem {
	t.Helper()
	m, _ := cost.Profile("h100")
	f, err := FabricOf(m, "cost_model")
	if err != nil {
		t.Fatal(err)
	}
	mesh := func(s string) *sharding.Mesh {
		mm, err := sharding.ParseMeshString(s, "mesh")
		if err != nil {
			t.Fatal(err)
		}
		return mm
	}
	ids := func(first, k int) []int {
		out := make([]int, k)
		for i := range out {
			out[i] = first + i
		}
		return out
	}
	sm, tm := mesh(srcMesh), mesh(tgtMesh)
	p := &Problem{Fabric: f, Devices: n, Source: Placement{Field: "source", Mesh: sm, Devices: ids(srcFirst, sm.NumDevices())}}
	for r, first := range tgtFirst {
		p.Targets = append(p.Targets, Placement{Field: fmt.Sprintf("targets[%d]", r), Mesh: tm, Devices: ids(first, tm.NumDevices())})
	}
	for i, mt := range tensors {
		shape := make([]int64, len(mt.Shape))
		for d, v := range mt.Shape {
			shape[d] = int64(v)
		}
		parse := func(v any, m *sharding.Mesh) sharding.Sharding {
			raw, _ := json.Marshal(v)
			s, err := sharding.Parse(raw, m, shape, mt.Name)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		p.Tensors = append(p.Tensors, Tensor{Name: mt.Name, Field: fmt.Sprintf("tensors[%d]", i), Shape: shape, ElemBits: 16,
			Source: parse(mt.Source, sm), Target: parse(mt.Target, tm), Count: max(mt.Repeat, 1)})
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

func firsts(n, size, first int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i*size
	}
	return out
}

// TestModels plans real models' weight syncs: each plan replays, is priced at or
// above the bound and within 1.25x of it.
func TestModels(t *testing.T) {
	moe := testgen.MoELayer(64, 4096, 1408, 4)
	cases := []struct {
		name string
		p    *Problem
	}{
		{"llama3-8b disjoint", modelProblem(t, 64, "fsdp=4,tp=8", 0, "tp=8", firsts(4, 8, 32), testgen.Llama3_8B.Tensors())},
		{"llama3-8b colocated", modelProblem(t, 32, "fsdp=4,tp=8", 0, "tp=8", firsts(4, 8, 0), testgen.Llama3_8B.Tensors())},
		{"moe ep=8 to ep=2,tp=8", modelProblem(t, 96, "fsdp=4,ep=8", 0, "ep=2,tp=8", firsts(4, 16, 32), moe)},
		{"moe one trainer node, 8 replicas", modelProblem(t, 136, "fsdp=1,ep=8", 0, "ep=2,tp=8", firsts(8, 16, 8), moe)},
	}
	if *long {
		// The api's tests plan it on every run; -long replays it too.
		cases = append(cases, struct {
			name string
			p    *Problem
		}{"llama3-70b disjoint", modelProblem(t, 384, "fsdp=32,tp=8", 0, "tp=8", firsts(16, 8, 256), testgen.Llama3_70B.Tensors())})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Plan(context.Background(), c.p)
			if err != nil {
				t.Fatal(err)
			}
			if err := replay(c.p, res); err != nil {
				t.Fatal(err)
			}
			ratio := res.TimeUS / res.Bound.TimeUS
			t.Logf("%s: %.0f us, bound %.0f us (%s), %.3fx, %d buckets", res.Strategy, res.TimeUS, res.Bound.TimeUS, res.Bound.Binding, ratio, res.Buckets)
			if ratio < 1-1e-9 || ratio > 1.25 {
				t.Fatalf("time %.1f us is %.3fx the bound %.1f us; want 1 to 1.25", res.TimeUS, ratio, res.Bound.TimeUS)
			}
		})
	}
}
