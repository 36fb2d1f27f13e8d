package sharding_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

func TestParseMeshString(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		axes  []sharding.Axis
		field string // when an error is expected
		msg   string
	}{
		{name: "two axes", in: "x=2,y=4", axes: []sharding.Axis{{"x", 2}, {"y", 4}}},
		{name: "spaces", in: " x = 2 , y=4 ", axes: []sharding.Axis{{"x", 2}, {"y", 4}}},
		{name: "size one", in: "data=1", axes: []sharding.Axis{{"data", 1}}},
		{name: "underscore names", in: "_a=3,b_2=5", axes: []sharding.Axis{{"_a", 3}, {"b_2", 5}}},
		{name: "at the device ceiling", in: "x=1073741824", axes: []sharding.Axis{{"x", 1 << 30}}},
		{name: "empty", in: "", field: "mesh", msg: "empty mesh"},
		{name: "blank", in: "   ", field: "mesh", msg: "empty mesh"},
		{name: "no equals", in: "x=2,y", field: "mesh", msg: "not name=size"},
		{name: "trailing comma", in: "x=2,", field: "mesh", msg: "not name=size"},
		{name: "size not a number", in: "x=two", field: "mesh", msg: "not an integer"},
		{name: "size empty", in: "x=", field: "mesh", msg: "not an integer"},
		{name: "size zero", in: "x=0", field: "mesh", msg: "sizes must be >= 1"},
		{name: "size negative", in: "x=2,y=-4", field: "mesh", msg: `axis "y" has size -4`},
		{name: "duplicate name", in: "x=2,x=4", field: "mesh", msg: "must be unique"},
		{name: "name starts with digit", in: "1x=2", field: "mesh", msg: "must match"},
		{name: "empty name", in: "=2", field: "mesh", msg: "must match"},
		{name: "name with dash", in: "a-b=2", field: "mesh", msg: "must match"},
		{name: "10^9 x 10^9 devices", in: "x=1000000000,y=1000000000", field: "mesh", msg: "more than 1073741824 devices"},
		{name: "one past the ceiling", in: "x=1073741825", field: "mesh", msg: "more than"},
		{name: "product overflowing int64", in: "x=4,y=4611686018427387904", field: "mesh", msg: "more than"},
		{name: "huge size", in: "x=99999999999999999999", field: "mesh", msg: "not an integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := sharding.ParseMeshString(tc.in, "mesh")
			if tc.field != "" {
				sharding.RequireFieldError(t, err, tc.field, tc.msg)
				assert.Nil(t, m)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, sharding.DefaultMeshName, m.Name)
			assert.Equal(t, tc.axes, m.Axes)
			assert.Nil(t, m.DeviceIDs)
			// String re-prints a parseable, equal mesh.
			m2 := sharding.MustMesh(t, m.String())
			assert.Equal(t, m.Axes, m2.Axes)
		})
	}
}

func TestNewMesh(t *testing.T) {
	tests := []struct {
		name  string
		mname string
		axes  []sharding.Axis
		ids   []int
		want  []int // DeviceIDs after canonicalisation
		field string
		msg   string
	}{
		{name: "default name", axes: []sharding.Axis{{"x", 2}}},
		{name: "permutation kept", mname: "m", axes: []sharding.Axis{{"x", 2}, {"y", 2}}, ids: []int{3, 1, 2, 0}, want: []int{3, 1, 2, 0}},
		{name: "identity canonicalised away", axes: []sharding.Axis{{"x", 2}, {"y", 2}}, ids: []int{0, 1, 2, 3}},
		{name: "no axes: one device", axes: nil},
		{name: "too few ids", axes: []sharding.Axis{{"x", 4}}, ids: []int{0, 1, 2}, field: "device_ids", msg: "has 3 ids but the mesh has 4 devices"},
		{name: "too many ids", axes: []sharding.Axis{{"x", 2}}, ids: []int{0, 1, 2}, field: "device_ids", msg: "has 3 ids"},
		{name: "empty ids", axes: []sharding.Axis{{"x", 2}}, ids: []int{}, field: "device_ids", msg: "has 0 ids"},
		{name: "id out of range", axes: []sharding.Axis{{"x", 4}}, ids: []int{0, 1, 4, 2}, field: "device_ids[2]", msg: "outside 0..3"},
		{name: "negative id", axes: []sharding.Axis{{"x", 2}}, ids: []int{-1, 0}, field: "device_ids[0]", msg: "outside 0..1"},
		{name: "repeated id", axes: []sharding.Axis{{"x", 4}}, ids: []int{0, 2, 2, 1}, field: "device_ids[2]", msg: "appears twice (also at [1])"},
		{name: "bad mesh name", mname: "my-mesh", axes: []sharding.Axis{{"x", 2}}, field: "name", msg: "must match"},
		{name: "bad axis name", axes: []sharding.Axis{{"x", 2}, {"9", 2}}, field: "axes[1].name", msg: "must match"},
		{name: "duplicate axis", axes: []sharding.Axis{{"x", 2}, {"x", 2}}, field: "axes[1].name", msg: "already axis 0"},
		{name: "zero size", axes: []sharding.Axis{{"x", 2}, {"y", 0}}, field: "axes[1].size", msg: "sizes must be >= 1"},
		{name: "too many devices", axes: []sharding.Axis{{"x", 1 << 20}, {"y", 1 << 20}}, field: "axes[1].size", msg: "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := sharding.NewMesh(tc.mname, tc.axes, tc.ids)
			if tc.field != "" {
				sharding.RequireFieldError(t, err, tc.field, tc.msg)
				return
			}
			require.NoError(t, err)
			if tc.mname == "" {
				assert.Equal(t, sharding.DefaultMeshName, m.Name)
			}
			assert.Equal(t, tc.want, m.DeviceIDs)
		})
	}
}

func TestMeshValidateFieldPaths(t *testing.T) {
	m := &sharding.Mesh{Axes: []sharding.Axis{{"x", 2}, {"y", 0}}}
	sharding.RequireFieldError(t, m.Validate("mesh"), "mesh.axes[1].size", `axis "y" has size 0`)
	m = &sharding.Mesh{Axes: []sharding.Axis{{"x", 2}}, DeviceIDs: []int{0, 0}}
	sharding.RequireFieldError(t, m.Validate("mesh"), "mesh.device_ids[1]", "appears twice")
}

func TestMeshCoordsAndPositions(t *testing.T) {
	m, err := sharding.NewMesh("", []sharding.Axis{{"x", 2}, {"y", 3}, {"z", 4}}, nil)
	require.NoError(t, err)
	require.Equal(t, 24, m.NumDevices())
	// Row-major, first axis major: position 17 = 1*12 + 1*4 + 1.
	assert.Equal(t, []int{1, 1, 1}, m.Coords(17, nil))
	assert.Equal(t, []int{0, 2, 3}, m.Coords(11, nil))
	seen := map[[3]int]bool{}
	buf := make([]int, 3)
	for p := range m.NumDevices() {
		c := m.Coords(p, buf)
		for i, a := range m.Axes {
			require.True(t, c[i] >= 0 && c[i] < a.Size)
		}
		seen[[3]int(c)] = true
		require.Equal(t, p, m.PositionOfCoords(c), "position %d", p)
	}
	assert.Len(t, seen, 24, "coords are a bijection")
	assert.Equal(t, 12, m.Stride("x"))
	assert.Equal(t, 4, m.Stride("y"))
	assert.Equal(t, 1, m.Stride("z"))
	assert.Equal(t, 0, m.Stride("q"))
	assert.Equal(t, 3, m.AxisSize("y"))
	assert.Equal(t, 0, m.AxisSize("q"))
	assert.Equal(t, -1, m.AxisIndex("q"))
}

func TestMeshDeviceIDs(t *testing.T) {
	ids := []int{5, 3, 0, 1, 4, 2}
	m, err := sharding.NewMesh("m", []sharding.Axis{{"x", 2}, {"y", 3}}, ids)
	require.NoError(t, err)
	for p, id := range ids {
		assert.Equal(t, id, m.DeviceAt(p))
		assert.Equal(t, p, m.PositionOf(id))
	}
	id := sharding.MustMesh(t, "x=2,y=3")
	for p := range 6 {
		assert.Equal(t, p, id.DeviceAt(p))
		assert.Equal(t, p, id.PositionOf(p))
	}
	assert.True(t, m.SameLayout(m))
	assert.False(t, m.SameLayout(id), "different device order")
	renamed, err := sharding.NewMesh("other", []sharding.Axis{{"x", 2}, {"y", 3}}, append([]int(nil), ids...))
	require.NoError(t, err)
	assert.True(t, m.SameLayout(renamed), "names of meshes do not matter")
	assert.False(t, id.SameLayout(sharding.MustMesh(t, "x=3,y=2")))
	assert.Equal(t, "x=2,y=3", m.String())
}
