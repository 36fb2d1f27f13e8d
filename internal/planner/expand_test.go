package planner

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// successorsOf expands src's state toward tgt's with the searcher's move set set up by
// setup, and returns each successor's state with its op.
func successorsOf(t *testing.T, mesh string, shape []int64, src, tgt string, setup func(s *searcher)) (sp *space, out []struct {
	op Op
	st state
}) {
	m := mustMesh(t, mesh)
	f, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: mustSharding(t, m, shape, src), Target: mustSharding(t, m, shape, tgt), Model: f, MaxExpansions: DefaultMaxExpansions}
	sp, ok = newSpace(r.Mesh, r.Shape, r.ElemBits, r.Source, r.Target)
	require.True(t, ok)
	start, goal := sp.stateOf(r.Source), sp.stateOf(r.Target)
	s := newSearcher(sp, r, start, goal, nil)
	setup(s)
	s.expand(start, func(nx state, op Op, _, _ int, _ uint64) {
		cp := make(state, len(nx))
		for d := range nx {
			cp[d] = slices.Clone(nx[d])
		}
		out = append(out, struct {
			op Op
			st state
		}{op, cp})
	})
	return sp, out
}

// TestSlicesFollowGoalOrder: a goal atom goes into its goal dim (by slice or
// all_to_all) only after the unused atoms the goal lists before it; the other order
// leaves a state a later permute must undo.
func TestSlicesFollowGoalOrder(t *testing.T) {
	sp, succ := successorsOf(t, "x=2,y=2,z=2", []int64{64, 64}, `["z", null]`, `[["x","y"], null]`, func(s *searcher) {})
	x, y := atomNamed(t, sp, "x"), atomNamed(t, sp, "y")
	var sliced [][]uint8
	for _, c := range succ {
		if c.op == OpSlice {
			sliced = append(sliced, c.st[0])
		}
	}
	require.NotEmpty(t, sliced)
	for _, d := range sliced {
		require.False(t, slices.Contains(d, y) && !slices.Contains(d, x), "y sliced before x: %v", d)
	}
	// y may follow once x is in place (or used elsewhere).
	sp, succ = successorsOf(t, "x=2,y=2,z=2", []int64{64, 64}, `[["z","x"], null]`, `[["x","y"], null]`, func(s *searcher) {})
	y = atomNamed(t, sp, "y")
	found := false
	for _, c := range succ {
		found = found || c.op == OpSlice && slices.Contains(c.st[0], y)
	}
	require.True(t, found, "y must be sliced in after x")
}

// TestWholeGathers: with wholeGathers (the strict passes) an all_gather drops a dim's
// whole suffix past its goal prefix; without it (the relaxed pass) every suffix.
func TestWholeGathers(t *testing.T) {
	gathers := func(whole bool) [][]uint8 {
		_, succ := successorsOf(t, "x=2,y=2,z=2", []int64{64, 64}, `[["x","y","z"], null]`, `[["x"], null]`, func(s *searcher) { s.wholeGathers = whole })
		var out [][]uint8
		for _, c := range succ {
			if c.op == OpAllGather {
				out = append(out, c.st[0])
			}
		}
		return out
	}
	whole, all := gathers(true), gathers(false)
	require.Len(t, whole, 1, "%v", whole)
	require.Len(t, whole[0], 1, "the whole suffix past the goal prefix [x] goes")
	require.Len(t, all, 2, "[x y] and [x]: %v", all)
}

// atomNamed is the index of the atom that is mesh axis name, whole.
func atomNamed(t *testing.T, sp *space, name string) uint8 {
	for i, a := range sp.atoms {
		if a.Name == name {
			return uint8(i)
		}
	}
	t.Fatalf("no atom %s in %v", name, sp.atoms)
	return 0
}

// TestStateKeysRoundTrip: every state key the search uses decodes to the state it
// encodes, and distinct states get distinct keys, on random states (atoms placed in
// random dims and orders, some left out) of every rank and atom count each key admits.
func TestStateKeysRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	small := map[smallKey]string{}
	packed := map[packedKey]string{}
	for range 3000 {
		rank := 1 + rng.IntN(7)
		atoms := rng.IntN(17)
		sp := &space{}
		for range atoms {
			sp.atoms = append(sp.atoms, sharding.AxisRef{Name: "x", Pre: 1, Size: 2, Of: 2})
		}
		st := make(state, rank)
		for _, a := range rng.Perm(atoms) {
			if d := rng.IntN(rank + 1); d < rank {
				st[d] = append(st[d], uint8(a))
			}
		}
		if smallPackable(sp, rank) {
			checkStateKey(t, small, packSmall(st), st)
		}
		if packable(sp, rank) {
			checkStateKey(t, packed, packKey(st), st)
		}
	}
	require.Greater(t, len(small), 1000)
}

// checkStateKey checks that k decodes to st and that no other state seen (by key) had k.
func checkStateKey[K searchKey](t *testing.T, seen map[K]string, k K, st state) {
	t.Helper()
	require.True(t, k.decode(make(state, len(st))).equal(st), "%v", st)
	if prev, ok := seen[k]; ok {
		require.Equal(t, prev, st.key(), "two states share a key")
	}
	seen[k] = st.key()
}
