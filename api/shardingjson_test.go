package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestShardingWriterSharesOnlyEqualShardings: a writer's memoized renderings are those a
// fresh writer gives, stable or not (a stable writer past its list of recent shardings
// too), and shardings that differ in any field get different keys and compare unequal.
func TestShardingWriterSharesOnlyEqualShardings(t *testing.T) {
	m, err := sharding.ParseMeshString("x=2,y=4,z=2", "mesh")
	require.NoError(t, err)
	x, y, z := sharding.FullAxis(m.Axes[0]), sharding.FullAxis(m.Axes[1]), sharding.FullAxis(m.Axes[2])
	y1 := sharding.AxisRef{Name: "y", Pre: 1, Size: 2, Of: 4}
	y2 := sharding.AxisRef{Name: "y", Pre: 2, Size: 2, Of: 4}
	dim := func(open bool, prio int, axes ...sharding.AxisRef) sharding.DimSharding {
		return sharding.DimSharding{Axes: axes, Open: open, Priority: prio}
	}
	no := sharding.NoPriority
	shardings := []sharding.Sharding{
		{Dims: []sharding.DimSharding{dim(false, no, x), dim(false, no)}},
		{Dims: []sharding.DimSharding{dim(false, no), dim(false, no, x)}},
		{Dims: []sharding.DimSharding{dim(true, no, x), dim(false, no)}},
		{Dims: []sharding.DimSharding{dim(false, 0, x), dim(false, no)}},
		{Dims: []sharding.DimSharding{dim(false, 1, x), dim(false, no)}},
		{Dims: []sharding.DimSharding{dim(false, no, x, y), dim(false, no)}},
		{Dims: []sharding.DimSharding{dim(false, no, y, x), dim(false, no)}},
		{Dims: []sharding.DimSharding{dim(false, no, y1), dim(false, no, y2)}},
		{Dims: []sharding.DimSharding{dim(false, no, y2), dim(false, no, y1)}},
		{Dims: []sharding.DimSharding{dim(false, no, x), dim(false, no)}, Replicated: []sharding.AxisRef{z}},
		{Dims: []sharding.DimSharding{dim(false, no, x), dim(false, no)}, Unreduced: []sharding.AxisRef{z}},
		{Dims: []sharding.DimSharding{dim(false, no, x)}},
	}
	for p := range maxRecentShardings { // more than a stable writer keeps in its list
		shardings = append(shardings, sharding.Sharding{Dims: []sharding.DimSharding{dim(false, 2+p, y), dim(true, no)}})
	}
	for _, stable := range []bool{false, true} {
		w := &shardingWriter{m: m, stable: stable}
		keys := map[string]int{}
		for round := range 2 {
			for i, s := range shardings {
				require.Equal(t, shardingJSON(s, m), w.json(s.Clone()), "sharding %d, round %d, stable %v", i, round, stable)
				k := string(appendShardingKey(nil, s))
				if j, ok := keys[k]; ok && j != i {
					t.Fatalf("shardings %d and %d share key %q", j, i, k)
				}
				keys[k] = i
			}
		}
		require.Len(t, w.seen, len(shardings)-len(w.recent), "stable %v", stable)
		if stable {
			require.Len(t, w.recent, maxRecentShardings)
		} else {
			require.Empty(t, w.recent)
		}
	}
	for i, a := range shardings {
		for j, b := range shardings {
			require.Equal(t, i == j, shardingsEqual(a, b.Clone()), "shardings %d and %d", i, j)
		}
	}
}

// TestShardingKeyKnowsEveryField fails when a sharding type changes: appendShardingKey
// must then key the new field, and shardingsEqual compare it.
func TestShardingKeyKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{sharding.Sharding{}, "Dims Replicated Unreduced"},
		{sharding.DimSharding{}, "Axes Open Priority"},
		{sharding.AxisRef{}, "Name Pre Size Of"},
	} {
		typ := reflect.TypeOf(tc.v)
		var names []string
		for i := range typ.NumField() {
			names = append(names, typ.Field(i).Name)
		}
		require.Equal(t, tc.want, strings.Join(names, " "), typ.Name())
	}
}
