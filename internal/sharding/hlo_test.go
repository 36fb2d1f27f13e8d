package sharding

import (
	"encoding/json"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseHLOSeed003 reads the four HLO shardings of seed 003's XLA dumps and checks
// each against the same sharding written as a PartitionSpec array and in Shardy's form:
// same sharding, identical tiles on every device.
func TestParseHLOSeed003(t *testing.T) {
	cases := []struct {
		name, mesh, hlo, spec, shardy string
		shape                         []int64
	}{
		{"case1 P('X', None)", "X=2,Y=4", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", `["X", null]`, `[{"X"}, {}]`, []int64{2048, 2048}},
		{"case2 P('Y', None)", "X=2,Y=4", "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}", `["Y", null]`, `[{"Y"}, {}]`, []int64{2048, 2048}},
		{"case3 P(None, ('X','T'))", "C=1,D=2,Y=8,X=4,T=4", "{devices=[1,16,16]<=[16,16]T(1,0) last_tile_dim_replicate}", `[null, ["X", "T"]]`, `[{}, {"X", "T"}]`, []int64{2048, 2048}},
		{"case4 P('D', ('X','Y'))", "C=1,D=2,Y=8,X=4,T=4", "{devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate}", `["D", ["X", "Y"]]`, `[{"D"}, {"X", "Y"}]`, []int64{2048, 2048}},
		{"case4 target", "C=1,D=2,Y=8,X=4,T=4", "{devices=[1,256]<=[256]}", `[null, ["D", "Y", "X", "T"]]`, `[{}, {"D", "Y", "X", "T"}]`, []int64{2048, 2048}},
		{"case1 as dumped with metadata", "X=2,Y=4", `{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate metadata={op_name="x"}}`, `["X", null]`, `[{"X"}, {}]`, []int64{1024, 2048}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMesh(t, tc.mesh)
			got, err := Parse(json.RawMessage(jsonString(tc.hlo)), m, tc.shape, "source")
			require.NoError(t, err)
			spec := mustParse(t, tc.spec, m, tc.shape)
			shardy := mustParse(t, jsonString(tc.shardy), m, tc.shape)
			assert.True(t, got.Equal(spec), "hlo %s, spec %s", got, spec)
			assert.True(t, got.Equal(shardy), "hlo %s, shardy %s", got, shardy)
			assert.Equal(t, NewLayout(m, tc.shape, spec).Tiles(nil), NewLayout(m, tc.shape, got).Tiles(nil), "tiles")
			if tc.name != "case1 as dumped with metadata" {
				assert.Equal(t, tc.hlo, got.HLO(m), "prints back as XLA does")
			}
		})
	}
}

func TestHLOText(t *testing.T) {
	cases := []struct{ mesh, s, want string }{
		{"X=2,Y=4", `["X",null]`, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
		{"X=2,Y=4", `["Y",null]`, "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"},
		{"X=2,Y=4", `[null,null]`, "{replicated}"},
		{"X=2,Y=4", `["Y:(2)2","X"]`, "{devices=[2,2,2]<=[4,2]T(1,0) last_tile_dim_replicate}"},
		{"X=2,Y=4", `[["Y:(2)2","Y:(1)2"],"X"]`, "{devices=[4,2]<=[2,2,2]T(2,1,0)}"},
		{"X=2,Y=4", `{"dims":[{"axes":["X"]},{"axes":[]}],"unreduced":["Y"]}`, "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"},
		{"X=2,Y=4", `{"dims":[{"axes":[]},{"axes":[]}],"unreduced":["Y:(2)2"]}`, "{devices=[1,1,2,4]<=[4,2]T(1,0) last_tile_dims={unreduced, replicated}}"},
		{"X=2,Y=4", `{"dims":[],"unreduced":["X", "Y"]}`, "{unreduced}"},
		{"X=2,Y=4", `{"dims":[{"axes":["Y:(1)2"]}],"unreduced":["X"], "replicated": ["Y:(2)2"]}`, "{devices=[2,2,2]<=[2,2,2]T(1,0,2) last_tile_dims={unreduced, replicated}}"},
		{"C=1,D=2,Y=8,X=4,T=4", `["D",["X","Y"]]`, "{devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate}"},
		{"C=1,D=2,Y=8,X=4,T=4", `[null,["X","T"]]`, "{devices=[1,16,16]<=[16,16]T(1,0) last_tile_dim_replicate}"},
		{"C=1,D=2,Y=8,X=4,T=4", `[null,["D","Y","X","T"]]`, "{devices=[1,256]<=[256]}"},
	}
	for _, tc := range cases {
		m := mustMesh(t, tc.mesh)
		assert.Equal(t, tc.want, mustParse(t, tc.s, m, nil).HLO(m), tc.s)
	}
	// A mesh with device_ids prints the explicit list.
	m, err := NewMesh("m", []Axis{{Name: "x", Size: 2}, {Name: "y", Size: 2}}, []int{3, 2, 1, 0})
	require.NoError(t, err)
	assert.Equal(t, "{devices=[2,1,2]3,2,1,0 last_tile_dim_replicate}", mustParse(t, `["x",null]`, m, nil).HLO(m))
	assert.Equal(t, "{devices=[2,1,2]3,1,2,0 last_tile_dim_replicate}", mustParse(t, `["y",null]`, m, nil).HLO(m))
}

// TestParseHLOForms checks HLO texts against the sharding they mean.
func TestParseHLOForms(t *testing.T) {
	cases := []struct {
		name, mesh, hlo, want string // want in Shardy's body form
		shape                 []int64
	}{
		{"replicated", "x=2,y=4", "{replicated}", `[{}, {}]`, []int64{8, 8}},
		{"maximal on one device", "x=1", "{maximal device=0}", `[{}]`, []int64{8}},
		{"explicit ids", "x=2,y=4", "{devices=[2,4]0,1,2,3,4,5,6,7}", `[{"x"}, {"y"}]`, []int64{8, 8}},
		{"transposed ids", "x=2,y=4", "{devices=[4,2]0,4,1,5,2,6,3,7}", `[{"y"}, {"x"}]`, []int64{8, 8}},
		{"reversed sub-axes", "x=2,y=4", "{devices=[2,4]0,2,1,3,4,6,5,7}", `[{"x"}, {"y":(2)2, "y":(1)2}]`, []int64{8, 8}},
		{"iota transpose", "x=2,y=4", "{devices=[4,2]<=[2,4]T(1,0)}", `[{"y"}, {"x"}]`, []int64{8, 8}},
		{"sub-axes", "x=8", "{devices=[2,4]<=[8]}", `[{"x":(1)2}, {"x":(2)4}]`, []int64{8, 8}},
		{"reshape transpose", "x=8", "{devices=[2,2,2]<=[2,2,2]T(2,0,1)}", `[{"x":(4)2}, {"x":(1)2}, {"x":(2)2}]`, []int64{8, 8, 8}},
		{"minor three of twelve", "x=12", "{devices=[3,4]<=[4,3]T(1,0)}", `[{"x":(4)3}, {"x":(1)4}]`, []int64{12, 12}},
		{"replica order ignored", "x=2,y=2", "{devices=[2,1,2]2,0,3,1 last_tile_dim_replicate}", `[{"y"}, {}]`, []int64{4, 4}},
		{"last_tile_dims replicated", "x=2,y=2", "{devices=[2,1,2]<=[4] last_tile_dims={replicated}}", `[{"x"}, {}]`, []int64{4, 4}},
		{"two replication dims", "x=2,y=2,z=2", "{devices=[2,2,2]<=[8] last_tile_dims={replicated, replicated}}", `[{"x"}]`, []int64{4}},
		{"several axes one dim", "x=2,y=2,z=2", "{devices=[8,1]<=[2,2,2]T(2,0,1)}", `[{"z", "x", "y"}, {}]`, []int64{8, 8}},
		{"size-one axis", "a=1,x=4", "{devices=[1,4]<=[4]}", `[{}, {"x"}]`, []int64{8, 8}},
		{"shard_as ignored", "x=2", "{devices=[2]<=[2] shard_as 1}", `[{"x"}]`, []int64{8}},
		{"uneven dim", "x=4", "{devices=[4]<=[4]}", `[{"x"}]`, []int64{3}},
		{"unreduced", "x=2,y=4", "{unreduced}", `[{}, {}], unreduced={"x", "y"}`, []int64{8, 8}},
		{"unreduced subgroup", "x=2,y=4", "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}", `[{"x"}, {}], unreduced={"y"}`, []int64{8, 8}},
		{"unreduced and replicated", "x=2,y=4", "{devices=[1,2,4]<=[2,4]T(1,0) last_tile_dims={unreduced, replicated}}", `[{}], unreduced={"y":(1)2}`, []int64{8}},
		{"unreduced in any order", "x=2,y=2", "{devices=[2,2]0,2,1,3 last_tile_dims={unreduced}}", `[{"y"}], unreduced={"x"}`, []int64{8}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMesh(t, tc.mesh)
			got, err := ParseHLO(tc.hlo, m, tc.shape, "source")
			require.NoError(t, err)
			requireShardy(t, got, m, tc.shape, tc.want)
			again, err := ParseHLO(got.HLO(m), m, tc.shape, "source")
			require.NoError(t, err, "re-parse %s", got.HLO(m))
			assert.True(t, got.Equal(again), "round trip through %s", got.HLO(m))
		})
	}
}

func TestParseHLOWithDeviceIDs(t *testing.T) {
	m, err := NewMesh("m", []Axis{{Name: "x", Size: 2}, {Name: "y", Size: 2}}, []int{3, 2, 1, 0})
	require.NoError(t, err)
	got, err := ParseHLO("{devices=[2,1,2]3,1,2,0 last_tile_dim_replicate}", m, []int64{4, 4}, "source")
	require.NoError(t, err)
	assert.Equal(t, `[{"y"}, {}]`, got.Body())
	// The iota <=[4] lists ids 0,1,2,3: on this mesh that is axis x reversed... which the
	// reversed device_ids make the mesh's own order backwards: not expressible.
	_, err = ParseHLO("{devices=[2,2]<=[4]}", m, []int64{4, 4}, "source")
	requireFieldError(t, err, "source", "at offset 14", "device_ids")
}

// TestParseHLOWorkBudget: iotas on a mesh with device_ids are checked device by device
// and draw on the mesh's budget; iotas without device_ids and explicit lists do not.
func TestParseHLOWorkBudget(t *testing.T) {
	defer func(old int64) { hloWorkLimit = old }(hloWorkLimit)
	hloWorkLimit = 20
	ids := []int{7, 6, 5, 4, 3, 2, 1, 0}
	m, err := NewMesh("m", []Axis{{Name: "x", Size: 8}}, ids)
	require.NoError(t, err)
	for range 2 {
		_, err = ParseHLO("{devices=[8]<=[8]}", m, []int64{8}, "s")
		requireFieldError(t, err, "s", "no mesh axes") // reversed: not expressible, but checked
	}
	_, err = ParseHLO("{devices=[8]<=[8]}", m, []int64{8}, "s")
	requireFieldError(t, err, "s", "at offset 12", "more than 20 device-by-device checks")
	_, err = ParseHLO("{devices=[8]7,6,5,4,3,2,1,0}", m, []int64{8}, "s")
	require.NoError(t, err, "explicit lists pay with their own length")
	plain := mustMesh(t, "x=8")
	for range 5 {
		_, err = ParseHLO("{devices=[8]<=[8]}", plain, []int64{8}, "s")
		require.NoError(t, err, "symbolic: no budget")
	}
}

func TestParseHLOErrors(t *testing.T) {
	cases := []struct {
		name, mesh, hlo string
		shape           []int64
		want            []string
	}{
		{"maximal on a mesh", "x=2,y=4", "{maximal device=3}", []int64{8}, []string{"at offset 0", "one device", "all 8 devices"}},
		{"maximal off mesh", "x=2", "{maximal device=5}", []int64{8}, []string{"at offset 16", "not on the mesh"}},
		{"manual", "x=2", "{manual}", []int64{8}, []string{"at offset 0", "not modelled"}},
		{"manual subgroup", "x=2,y=2", "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", []int64{8, 8}, []string{"at offset 38", "manual"}},
		{"reversed sub-axes are fine, this is not", "x=2,y=4", "{devices=[8]0,1,2,3,4,5,7,6}", []int64{8}, []string{"at offset 24", "no mesh axes", "holds device 7"}},
		{"two axes in one step", "x=2,y=2", "{devices=[4]0,3,1,2}", []int64{8}, []string{"at offset 14", "two mesh axes"}},
		{"first device", "x=2", "{devices=[2]1,0}", []int64{8}, []string{"at offset 12", "first tile"}},
		{"tile count splits no axis", "x=2,y=3", "{devices=[3,2]<=[6]}", []int64{6, 6}, []string{"at offset 10", "tile count 3"}},
		{"device count", "x=2,y=4", "{devices=[2,2]<=[4]}", []int64{8, 8}, []string{"at offset 10", "4 devices but the mesh has 8"}},
		{"too many devices", "x=2", "{devices=[4,4]<=[16]}", []int64{8, 8}, []string{"at offset 10", "more than the mesh's 2"}},
		{"rank", "x=2", "{devices=[2,1]<=[2]}", []int64{8}, []string{"at offset 10", "rank 1"}},
		{"duplicate id", "x=2", "{devices=[2]1,1}", []int64{8}, []string{"at offset 14", "twice"}},
		{"bad perm", "x=2,y=2", "{devices=[4]<=[2,2]T(0,0)}", []int64{8}, []string{"at offset 23", "permutation"}},
		{"iota size", "x=2,y=2", "{devices=[4]<=[2]}", []int64{8}, []string{"at offset 12", "2 devices"}},
		{"unknown attribute", "x=2", "{devices=[2]<=[2] bogus}", []int64{8}, []string{"at offset 18", `"bogus"`}},
		{"tuple", "x=2", "{{replicated}, {replicated}}", []int64{8}, []string{"at offset 0", "tuple"}},
		{"unterminated", "x=2", "{devices=[2]<=[2]", []int64{8}, []string{"at offset 17", "end"}},
		{"empty", "x=2", "{}", []int64{8}, []string{"at offset 0", "empty"}},
		{"trailing", "x=2", "{replicated} x", []int64{8}, []string{"at offset 13", "after the sharding"}},
		{"size-0 dim", "x=2", "{devices=[2]<=[2]}", []int64{0}, []string{"size 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHLO(tc.hlo, mustMesh(t, tc.mesh), tc.shape, "source")
			requireFieldError(t, err, "source", tc.want...)
		})
	}
}

func TestParseHLOTuple(t *testing.T) {
	m := mustMesh(t, "x=2,y=2")
	shapes := [][]int64{{4, 4}, {4}}
	got, err := ParseHLOTuple("{{devices=[2,1,2]<=[4] last_tile_dim_replicate}, {replicated}}", m, shapes, "s")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, `[{"x"}, {}]`, got[0].Body())
	assert.Equal(t, `[{}]`, got[1].Body())
	got, err = ParseHLOTuple("{replicated}", m, shapes, "s")
	require.NoError(t, err)
	assert.Len(t, got, 2)
	// XLA numbers every fifth element of a long tuple.
	five := make([][]int64, 6)
	for i := range five {
		five[i] = []int64{4}
	}
	got, err = ParseHLOTuple("{{replicated}, {replicated}, {replicated}, {replicated}, {replicated}, /*index=5*/{devices=[4]<=[4]}}", m, five, "s")
	require.NoError(t, err)
	assert.Equal(t, `[{"x", "y"}]`, got[5].Body())
	_, err = ParseHLOTuple("{{replicated}}", m, shapes, "s")
	requireFieldError(t, err, "s", "1 elements", "2 results")
}

// shardIndices is, per device id, its shard index along every dim under s.
func shardIndices(m *Mesh, s Sharding) [][]int {
	l := NewLayout(m, make([]int64, len(s.Dims)), s)
	out := make([][]int, m.NumDevices())
	coords := make([]int, len(m.Axes))
	for id := range out {
		m.Coords(m.PositionOf(id), coords)
		for d := range s.Dims {
			out[id] = append(out[id], l.ShardIndex(d, coords))
		}
	}
	return out
}

// explicitHLO writes s's tile assignment as an explicit HLO device list, built straight
// from the definition (device id -> tile index and partial-sum index), not from the
// printer: tiles in row-major order, then the unreduced subgroup, the devices of a tile
// in id order (replicas may come in any order).
func explicitHLO(m *Mesh, s Sharding) string {
	counts := s.ShardCounts()
	if len(s.Unreduced) > 0 {
		counts = append(counts, Product(s.Unreduced))
	}
	if len(counts) == 0 {
		return "{replicated}"
	}
	idx := shardIndices(m, Sharding{Dims: append(slices.Clone(s.Dims), DimSharding{Axes: s.Unreduced})})
	tiles := 1
	for _, c := range counts {
		tiles *= c
	}
	groups := make([][]int, tiles)
	for id, ix := range idx {
		t := 0
		for d, c := range counts {
			t = t*c + ix[d]
		}
		groups[t] = append(groups[t], id)
	}
	var b strings.Builder
	b.WriteString("{devices=[")
	for d, c := range counts {
		if d > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
	}
	rep := m.NumDevices() / tiles
	if rep > 1 {
		b.WriteString("," + strconv.Itoa(rep))
	}
	b.WriteByte(']')
	k := 0
	for _, g := range groups {
		for _, id := range g {
			if k > 0 {
				b.WriteByte(',')
			}
			k++
			b.WriteString(strconv.Itoa(id))
		}
	}
	switch {
	case len(s.Unreduced) > 0 && rep > 1:
		b.WriteString(" last_tile_dims={unreduced,replicated}")
	case len(s.Unreduced) > 0:
		b.WriteString(" last_tile_dims={unreduced}")
	case rep > 1:
		b.WriteString(" last_tile_dim_replicate")
	}
	b.WriteByte('}')
	return b.String()
}

// TestPropertyHLO: for random meshes (device_ids included) and shardings, the printed HLO
// text and an explicit device list built from the definition both read back to a
// sharding that puts every device on the same tile.
func TestPropertyHLO(t *testing.T) {
	r := rand.New(rand.NewSource(14))
	for i := range 3000 {
		c := randCaseOf(t, r, 64, 12)
		want := shardIndices(c.m, c.s)
		for _, text := range []string{c.s.HLO(c.m), explicitHLO(c.m, c.s)} {
			got, err := ParseHLO(text, c.m, c.shape, "s")
			require.NoError(t, err, "case %d: %s: %s", i, c, text)
			require.Equal(t, want, shardIndices(c.m, got), "case %d: %s: %s -> %s", i, c, text, got)
			nonTrivial := slices.DeleteFunc(slices.Clone(c.s.Unreduced), func(r AxisRef) bool { return r.Size == 1 })
			require.True(t, slices.Equal(nonTrivial, got.Unreduced), "case %d: %s: %s -> %s", i, c, text, got)
			require.Equal(t, c.s.ShardCounts(), got.ShardCounts(), "case %d: %s", i, text)
		}
	}
}

// TestParseHLONamed reads XLA's named (V3) HloSharding.
func TestParseHLONamed(t *testing.T) {
	m := mustMesh(t, "data=2,model=4")
	shape := []int64{8, 8}
	cases := []struct{ name, text, want string }{
		{"dims", "{mesh[data=2,model=4], [{data}, {model}]}", `[{"data"}, {"model"}]`},
		{"sub-axes, open, sets", "{mesh[data=2,model=4], [{model:(1)2, ?}, {}], replicated={data}, unreduced={model:(2)2}, metadata={op_name=\"x\"}}", `[{"model":(1)2, ?}, {}], replicated={"data"}, unreduced={"model":(2)2}`},
		{"replicated", "{mesh[data=2,model=4], replicated}", `[{}, {}]`},
		{"unreduced", "{mesh[data=2,model=4], unreduced}", `[{}, {}], unreduced={"data", "model"}`},
		{"identity device ids", "{mesh[data=2,model=4], device_ids=([[0,1,2,3],[4,5,6,7]]), [{data}, {}]}", `[{"data"}, {}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHLO(tc.text, m, shape, "s")
			require.NoError(t, err)
			requireShardy(t, got, m, shape, tc.want)
		})
	}
	got, err := ParseHLO("{maximal_mesh[device_id=0]}", mustMesh(t, "x=1"), []int64{4}, "s")
	require.NoError(t, err)
	assert.Equal(t, `[{}]`, got.Body())
	for _, tc := range []struct{ text, want string }{
		{"{mesh[data=2,model=8], [{data}, {}]}", "at offset 1"},
		{"{mesh[data=2,model=4], [{data}, {q}]}", `at offset 33: unknown mesh axis "q"`},
		{"{mesh[data=2,model=4], [{data}, {data}]}", "at offset 33: axis \"data\" is used twice"},
		{"{mesh[data=2,model=4], manual}", "not modelled"},
		{"{mesh[data=2,model=4], [{data}, {}], manual={model}}", "manual axes"},
		{"{mesh[data=2,model=4], device_ids=(7,6,5,4,3,2,1,0), [{data}, {}]}", "not the request mesh's device_ids"},
		{"{maximal_mesh[device_id=3]}", "one device"},
		{"{mesh[data=2,model=4], [{data}]}", "rank 2"},
	} {
		_, err := ParseHLO(tc.text, m, shape, "s")
		requireFieldError(t, err, "s", tc.want)
	}
}
