package hlo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

func TestIota(t *testing.T) {
	cases := []struct {
		dims, perm []int
		want       []int
	}{
		{[]int{8}, []int{0}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{[]int{2, 4}, []int{1, 0}, []int{0, 4, 1, 5, 2, 6, 3, 7}},
		{[]int{2, 2, 2}, []int{1, 0, 2}, []int{0, 1, 4, 5, 2, 3, 6, 7}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Iota(tc.dims, tc.perm), "%v T%v", tc.dims, tc.perm)
	}
}

func TestParseGroups(t *testing.T) {
	cases := []struct {
		text string
		want [][]int
		err  string
	}{
		{"{}", nil, ""},
		{"{{0,1},{2,3}}", [][]int{{0, 1}, {2, 3}}, ""},
		{"[4,2]<=[8]", [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, ""},
		{"[2,4]<=[4,2]T(1,0)", [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}}, ""},
		{"[4,2]<=[2,2,2]T(1,0,2)", [][]int{{0, 1}, {4, 5}, {2, 3}, {6, 7}}, ""},
		{"[3,2]<=[8]", nil, "need 6 devices"},
		{"[4,2]<=[2,4]T(0,0)", nil, "not a permutation"},
		{"{{0,9}}", nil, "from 0 to 7"},
		{"[4,2]<=[8", nil, "expected [n,...]"},
		{"{{0,1}", nil, "unclosed group"},
		{"{{0,1},{}}", nil, "group 1 is empty"},
	}
	for _, tc := range cases {
		got, err := ParseGroups(tc.text, 8)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.text)
			continue
		}
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.want, got, tc.text)
	}
}

func TestGroupAxes(t *testing.T) {
	mesh, err := sharding.ParseMeshString("x=2,y=4", "mesh")
	require.NoError(t, err)
	cases := []struct {
		groups [][]int
		want   string
		err    string
	}{
		{[][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, "y", ""},
		{[][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, "x", ""},
		{[][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}}, "y:(1)2", ""},
		{[][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, "y:(2)2", ""},
		{[][]int{{0, 4, 1, 5, 2, 6, 3, 7}}, "y,x", ""},
		{nil, "x,y", ""},
		{[][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, "x,y", ""},
		{[][]int{{0, 3}, {1, 2}, {4, 7}, {5, 6}}, "", "no (sub-)axis"},
		{[][]int{{1, 0, 2, 3}, {4, 5, 6, 7}}, "", "in order"},
		{[][]int{{0, 1}, {2, 3, 4}}, "", "one size"},
	}
	for _, tc := range cases {
		got, err := GroupAxes(mesh, tc.groups)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, "%v", tc.groups)
			continue
		}
		require.NoError(t, err, "%v", tc.groups)
		assert.Equal(t, tc.want, axesText(got), "%v", tc.groups)
	}
}

// TestGroupAxesDeviceIDs: ids are the mesh's device ids, not positions.
func TestGroupAxesDeviceIDs(t *testing.T) {
	mesh, err := sharding.NewMesh("mesh", []sharding.Axis{{Name: "x", Size: 2}, {Name: "y", Size: 2}}, []int{3, 2, 1, 0})
	require.NoError(t, err)
	got, err := GroupAxes(mesh, [][]int{{3, 2}, {1, 0}})
	require.NoError(t, err)
	assert.Equal(t, "y", axesText(got))
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"mlir", "module @jit_f {\n}", "line 1, column 1: this is MLIR (StableHLO) text"},
		{"not hlo", "hello", "line 1, column 1: expected \"HloModule"},
		{"no body", "HloModule m\n\nENTRY %main () -> f32[] \n", "line 4, column 1: expected '{' opening the computation's body, found the end of the text"},
		{"bad shape", "HloModule m\nENTRY %e {\n  %p = f32[8 parameter(0)\n}\n", "line 3, column 14: expected ',' between dims"},
		{"no opcode paren", "HloModule m\nENTRY %e {\n  %p = f32[8]{0} parameter\n}\n", "line 3, column 27: expected '('"},
		{"unclosed", "HloModule m\nENTRY %e {\n  %p = f32[8]{0} parameter(0)\n", "line 4, column 1: computation %e (line 2) is not closed by '}'"},
		{"dup", "HloModule m\nENTRY %e {\n  %p = f32[8]{0} parameter(0)\n  %p = f32[8]{0} parameter(1)\n}\n", "line 4, column 3: instruction %p is defined twice"},
		{"bad attr", "HloModule m\nENTRY %e {\n  %p = f32[8]{0} parameter(0), 12\n}\n", "line 3, column 32: expected key=value after ',' in %p"},
		{"string", "HloModule m\nENTRY %e {\n  %p = f32[8]{0} parameter(0), metadata={op_name=\"x}\n}\n", "line 3, column 50: unterminated string"},
		{"partitions", "HloModule m, num_partitions=0\nENTRY %e {\n}\n", "line 1, column 29: num_partitions must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.src, Limits{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), Field+": line "), err.Error())
		})
	}
}

func TestParseLimits(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "seed003_case3.hlo"))
	require.NoError(t, err)
	_, err = Parse(string(src), Limits{MaxInstructions: 50})
	assert.ErrorContains(t, err, "more than 50 instructions")
}

func TestAnalyzeErrors(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "seed003_case1.hlo"))
	require.NoError(t, err)
	m, err := Parse(string(src), Limits{})
	require.NoError(t, err)
	mesh, err := sharding.ParseMeshString("x=4", "mesh")
	require.NoError(t, err)
	_, err = Analyze(context.Background(), m, Options{Mesh: mesh})
	assert.ErrorContains(t, err, "mesh: the mesh x=4 has 4 devices; the module runs on 8")
	// Without a mesh: the axes of the parameter's tile assignment devices=[2,1,4]<=[8].
	a, err := Analyze(context.Background(), m, Options{})
	require.NoError(t, err)
	require.Len(t, a.Collectives, 1)
	assert.Equal(t, "axis_0,axis_1", axesText(a.Collectives[0].MeshAxes))
	assert.Equal(t, MeshFromShardings, a.MeshSource)
	assert.Equal(t, "axis_0=2,axis_1=4", meshText(a.Mesh))
	assert.Contains(t, a.MeshNote, "tile dims [2,1,4]")

	bad := strings.Replace(string(src), "source_target_pairs={{0,0}", "source_target_pairs={{0,9}", 1)
	m, err = Parse(bad, Limits{})
	require.NoError(t, err)
	_, err = Analyze(context.Background(), m, Options{})
	assert.ErrorContains(t, err, "line 25, column")
	assert.ErrorContains(t, err, "source_target_pairs")
}

func TestTileCount(t *testing.T) {
	cases := map[string]int{
		"{devices=[2,1,4]<=[8] last_tile_dim_replicate}":                  2,
		"{devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate}": 64,
		"{devices=[2,4]0,1,2,3,4,5,6,7}":                                  8,
		"{replicated}":                                                    1,
		"{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}":      2,
	}
	for text, want := range cases {
		got, ok := TileCount(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, got, text)
	}
	_, ok := TileCount("{manual}")
	assert.False(t, ok)
}

// TestAnalyzeDecodeBudget: distinct replica_groups texts cost a pass over the devices
// each; past the budget the module is refused at the collective that crosses it, and
// a repeated text is decoded once.
func TestAnalyzeDecodeBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("HloModule m, num_partitions=8\nENTRY %e (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n")
	groups := []string{"[1,8]<=[8]", "[2,4]<=[8]", "[4,2]<=[8]", "[2,4]<=[8]", "[2,4]<=[4,2]T(1,0)"}
	for i, g := range groups {
		fmt.Fprintf(&b, "  %%r%d = f32[8]{0} all-reduce(%%p), channel_id=%d, replica_groups=%s, to_apply=%%add\n", i, i+1, g)
	}
	b.WriteString("  ROOT %t = f32[8]{0} copy(%p)\n}\n")
	m, err := Parse(b.String(), Limits{})
	require.NoError(t, err)
	one, err := sharding.NewMesh("mesh", []sharding.Axis{{Name: DefaultAxis, Size: 8}}, nil)
	require.NoError(t, err)
	a, err := Analyze(context.Background(), m, Options{Mesh: one, MaxDecodeWork: 4 * 8})
	require.NoError(t, err, "four distinct texts on 8 devices: within 32")
	assert.Len(t, a.Collectives, 5)
	assert.Equal(t, "devices:(2)4", axesText(a.Collectives[3].MeshAxes), "the repeated text decodes as the first")
	_, err = Analyze(context.Background(), m, Options{Mesh: one, MaxDecodeWork: 3 * 8})
	assert.ErrorContains(t, err, "line 8, column 64: %r4")
	assert.ErrorContains(t, err, "more than 24 device entries")
}
