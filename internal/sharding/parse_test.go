package sharding_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// formsMesh is API.md's example mesh with every axis its sharding example uses.
const formsMesh = "x=2,y=4,z=2,w=3,u=2"

func TestParseInputForms(t *testing.T) {
	m := sharding.MustMesh(t, formsMesh)
	shape := []int64{4, 8}
	tests := []struct {
		name string
		raw  string // JSON as sent
		want string // canonical Shardy body
	}{
		// object form
		{name: "object: API.md example", raw: `{"dims": [{"axes": ["x"]}, {"axes": ["z", "y"], "open": true, "priority": 1}], "replicated": ["w"], "unreduced": ["u"]}`,
			want: `[{"x"}, {"z", "y", ?}p1], replicated={"w"}, unreduced={"u"}`},
		{name: "object: text ignored", raw: `{"dims": [{"axes": ["x"]}, {}], "text": "anything at all"}`, want: `[{"x"}, {}]`},
		{name: "object: empty and null axes", raw: `{"dims": [{"axes": []}, {"axes": null}]}`, want: `[{}, {}]`},
		{name: "object: nulls mean absent", raw: `{"dims": [{"axes": ["y"], "open": null, "priority": null}, {}], "replicated": null, "unreduced": null}`, want: `[{"y"}, {}]`},
		{name: "object: axis indices", raw: `{"dims": [{"axes": [0]}, {"axes": [2, 1]}]}`, want: `[{"x"}, {"z", "y"}]`},
		{name: "object: sub-axes", raw: `{"dims": [{"axes": ["y:(1)2"]}, {"axes": ["y:(2)2"]}]}`, want: `[{"y":(1)2}, {"y":(2)2}]`},
		{name: "object: open empty dim with priority", raw: `{"dims": [{"open": true, "priority": 0}, {"axes": ["x"], "priority": 3}]}`, want: `[{?}p0, {"x"}p3]`},
		{name: "object: priority 0 closed", raw: `{"dims": [{"axes": ["x"], "priority": 0}, {}]}`, want: `[{"x"}p0, {}]`},
		// Shardy text, bare and wrapped
		{name: "text: API.md example", raw: sharding.JSONString(`[{"x"}, {"z", "y", ?}p1], replicated={"w"}, unreduced={"u"}`),
			want: `[{"x"}, {"z", "y", ?}p1], replicated={"w"}, unreduced={"u"}`},
		{name: "text: wrapped", raw: sharding.JSONString(`sharding<@mesh, [{"x"}, {"z", "y", ?}p1], replicated={"w"}, unreduced={"u"}>`),
			want: `[{"x"}, {"z", "y", ?}p1], replicated={"w"}, unreduced={"u"}`},
		{name: "text: no spaces", raw: sharding.JSONString(`[{"x"},{"z","y",?}p1],replicated={"w"}`), want: `[{"x"}, {"z", "y", ?}p1], replicated={"w"}`},
		{name: "text: lots of space", raw: sharding.JSONString("  sharding< @mesh ,\n [ { \"x\" } , { ? } ] , unreduced = { \"u\" } >  "), want: `[{"x"}, {?}], unreduced={"u"}`},
		{name: "text: sub-axes Shardy style", raw: sharding.JSONString(`[{"y":(1)2}, {"y":(2)2}]`), want: `[{"y":(1)2}, {"y":(2)2}]`},
		{name: "text: sub-axes quoted whole", raw: sharding.JSONString(`[{"y:(1)2"}, {"y:(2)2"}]`), want: `[{"y":(1)2}, {"y":(2)2}]`},
		{name: "text: empty replicated set", raw: sharding.JSONString(`[{"x"}, {}], replicated={}`), want: `[{"x"}, {}]`},
		{name: "text: two replicated clauses", raw: sharding.JSONString(`[{}, {}], replicated={"w"}, replicated={"x"}`), want: `[{}, {}], replicated={"x", "w"}`},
		{name: "text: unreduced before replicated", raw: sharding.JSONString(`[{}, {}], unreduced={"u"}, replicated={"w"}`), want: `[{}, {}], replicated={"w"}, unreduced={"u"}`},
		// PartitionSpec-like arrays
		{name: "array: API.md names", raw: `["x", null]`, want: `[{"x"}, {}]`},
		{name: "array: nested names", raw: `[["x"], ["z", "y"]]`, want: `[{"x"}, {"z", "y"}]`},
		{name: "array: indices", raw: `[[0], [2, 1]]`, want: `[{"x"}, {"z", "y"}]`},
		{name: "array: bare indices", raw: `[0, 1]`, want: `[{"x"}, {"y"}]`},
		{name: "array: mixed names and indices", raw: `[["x", 3], "z"]`, want: `[{"x", "w"}, {"z"}]`},
		{name: "array: null and empty", raw: `[null, []]`, want: `[{}, {}]`},
		{name: "array: sub-axes", raw: `[["y:(2)2"], "y:(1)2"]`, want: `[{"y":(2)2}, {"y":(1)2}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sharding.MustParse(t, tc.raw, m, shape)
			assert.Equal(t, tc.want, s.Body())
			assert.Equal(t, "sharding<@mesh, "+tc.want+">", s.Text(m.Name))
			// The canonical body parses back to the same sharding.
			again, err := sharding.ParseText(s.Body(), m, shape, "source")
			require.NoError(t, err)
			assert.True(t, s.Equal(again), "%s != %s", s, again)
		})
	}
}

func TestParseScalar(t *testing.T) {
	m := sharding.MustMesh(t, "x=2")
	for _, raw := range []string{`[]`, `{"dims": []}`, sharding.JSONString(`[]`), sharding.JSONString(`sharding<@mesh, []>`), sharding.JSONString(`[], replicated={"x"}`)} {
		s, err := sharding.Parse(json.RawMessage(raw), m, []int64{}, "source")
		require.NoError(t, err, raw)
		assert.Equal(t, 0, s.Rank(), raw)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		mesh  string // default formsMesh
		shape []int64
		raw   string
		field string
		msg   []string
	}{
		// ---- object form ----
		{name: "object: unknown axis", raw: `{"dims": [{"axes": ["x"]}, {"axes": ["q"]}]}`,
			field: "source.dims[1].axes[0]", msg: []string{`unknown mesh axis "q" (mesh axes: x, y, z, w, u)`}},
		{name: "object: axis index out of range", raw: `{"dims": [{"axes": [5]}, {}]}`,
			field: "source.dims[0].axes[0]", msg: []string{"mesh axis index 5 is out of range", "0..4"}},
		{name: "object: negative axis index", raw: `{"dims": [{"axes": [-1]}, {}]}`,
			field: "source.dims[0].axes[0]", msg: []string{"out of range"}},
		{name: "object: duplicate axis across dims", raw: `{"dims": [{"axes": ["x"]}, {"axes": ["x"]}]}`,
			field: "source.dims[1].axes[0]", msg: []string{`axis "x" is used twice`, "source.dims[0].axes[0]"}},
		{name: "object: duplicate axis in one dim", raw: `{"dims": [{"axes": ["y", "y"]}, {}]}`,
			field: "source.dims[0].axes[1]", msg: []string{"used twice"}},
		{name: "object: overlapping sub-axes", raw: `{"dims": [{"axes": ["x"]}, {"axes": ["x:(1)2"]}]}`,
			mesh: "x=4", field: "source.dims[1].axes[0]", msg: []string{`"x:(1)2" overlaps "x"`}},
		{name: "object: overlapping sub-axes of 8", raw: `{"dims": [{"axes": ["x:(1)4"]}, {"axes": ["x:(2)4"]}]}`,
			mesh: "x=8", field: "source.dims[1].axes[0]", msg: []string{"overlaps"}},
		{name: "object: sub-axes that cannot coexist", raw: `{"dims": [{"axes": ["x:(1)2"]}, {"axes": ["x:(3)2"]}]}`,
			mesh: "x=6", field: "source.dims[1].axes[0]", msg: []string{"cannot coexist", "factorisation"}},
		{name: "object: sub-axis k=1", raw: `{"dims": [{"axes": ["y:(1)1"]}, {}]}`,
			field: "source.dims[0].axes[0]", msg: []string{"need k > 1"}},
		{name: "object: sub-axis m*k not dividing", raw: `{"dims": [{"axes": ["y:(3)2"]}, {}]}`,
			field: "source.dims[0].axes[0]", msg: []string{"m*k dividing 4"}},
		{name: "object: malformed sub-axis", raw: `{"dims": [{"axes": ["y:(2"]}, {}]}`,
			field: "source.dims[0].axes[0]", msg: []string{"not of the form"}},
		{name: "object: rank mismatch", raw: `{"dims": [{"axes": ["x"]}]}`,
			field: "source.dims", msg: []string{"has 1 dims but the tensor has rank 2"}},
		{name: "object: negative priority", raw: `{"dims": [{"axes": ["x"], "priority": -5}, {}]}`,
			field: "source.dims[0].priority", msg: []string{"priority -5 is negative"}},
		{name: "object: priority too large", raw: `{"dims": [{"axes": ["x"], "priority": 3000000000}, {}]}`,
			field: "source.dims[0].priority", msg: []string{"too large"}},
		{name: "object: fractional priority", raw: `{"dims": [{"axes": ["x"], "priority": 1.5}, {}]}`,
			field: "source.dims[0].priority", msg: []string{"not an integer"}},
		{name: "object: priority string", raw: `{"dims": [{"axes": ["x"], "priority": "1"}, {}]}`,
			field: "source.dims[0].priority", msg: []string{"must be an integer", "a string"}},
		{name: "object: priority on empty closed dim", raw: `{"dims": [{"axes": [], "priority": 1}, {}]}`,
			field: "source.dims[0]", msg: []string{"empty closed dim cannot carry a priority"}},
		{name: "object: unknown top-level field", raw: `{"dims": [{}, {}], "replica": ["x"]}`,
			field: "source.replica", msg: []string{"unknown field", "dims, replicated, unreduced, text"}},
		{name: "object: unknown dim field", raw: `{"dims": [{}, {"axes": ["x"], "closed": true}]}`,
			field: "source.dims[1].closed", msg: []string{"unknown field", "axes, open, priority"}},
		{name: "object: dims missing", raw: `{"replicated": ["x"]}`, field: "source.dims", msg: []string{"is required"}},
		{name: "object: dims null", raw: `{"dims": null}`, field: "source.dims", msg: []string{"is required"}},
		{name: "object: dims not an array", raw: `{"dims": {"axes": ["x"]}}`, field: "source.dims", msg: []string{"must be an array", "an object"}},
		{name: "object: dim not an object", raw: `{"dims": [["x"], {}]}`, field: "source.dims[0]", msg: []string{"must be an object", "an array"}},
		{name: "object: axes not an array", raw: `{"dims": [{}, {"axes": "x"}]}`, field: "source.dims[1].axes", msg: []string{"must be an array", "a string"}},
		{name: "object: axis a boolean", raw: `{"dims": [{}, {"axes": [true]}]}`, field: "source.dims[1].axes[0]", msg: []string{"must be an axis name string"}},
		{name: "object: axis null", raw: `{"dims": [{}, {"axes": [null]}]}`, field: "source.dims[1].axes[0]", msg: []string{"not null"}},
		{name: "object: open not a boolean", raw: `{"dims": [{}, {"open": "yes"}]}`, field: "source.dims[1].open", msg: []string{"must be a boolean", "a string"}},
		{name: "object: replicated not an array", raw: `{"dims": [{}, {}], "replicated": "x"}`, field: "source.replicated", msg: []string{"must be an array"}},
		{name: "object: replicated + dim reuse", raw: `{"dims": [{"axes": ["x"]}, {}], "replicated": ["x"]}`,
			field: "source.replicated[0]", msg: []string{`axis "x" is used twice`, "source.dims[0].axes[0]"}},
		{name: "object: replicated unknown axis", raw: `{"dims": [{}, {}], "replicated": ["w", "q"]}`,
			field: "source.replicated[1]", msg: []string{"unknown mesh axis"}},
		{name: "object: unreduced + dim reuse", raw: `{"dims": [{"axes": ["y"]}, {}], "unreduced": ["y:(2)2"]}`,
			field: "source.unreduced[0]", msg: []string{`"y:(2)2" overlaps "y"`}},
		{name: "object: unreduced + replicated reuse", raw: `{"dims": [{}, {}], "replicated": ["u"], "unreduced": ["u"]}`,
			field: "source.unreduced[0]", msg: []string{"used twice", "source.replicated[0]"}},
		{name: "object: sharding a size-0 dim", shape: []int64{0, 8}, raw: `{"dims": [{"axes": ["x"]}, {}]}`,
			field: "source.dims[0]", msg: []string{"size 0 cannot be sharded"}},
		{name: "object: malformed JSON", raw: `{"dims": [}`, field: "source", msg: []string{"malformed JSON"}},
		{name: "object: trailing data", raw: `{"dims": [{}, {}]} {}`, field: "source", msg: []string{"data after the JSON value"}},
		// ---- array form ----
		{name: "array: unknown axis (bare)", raw: `["x", "q"]`, field: "source[1]", msg: []string{`unknown mesh axis "q"`}},
		{name: "array: unknown axis (nested)", raw: `[["x"], ["q"]]`, field: "source[1][0]", msg: []string{`unknown mesh axis "q"`}},
		{name: "array: unknown axis (second in list)", raw: `[["x"], ["y", "q"]]`, field: "source[1][1]", msg: []string{"unknown mesh axis"}},
		{name: "array: index out of range (bare)", raw: `[0, 9]`, field: "source[1]", msg: []string{"mesh axis index 9 is out of range"}},
		{name: "array: index out of range (nested)", raw: `[[0], [1, 9]]`, field: "source[1][1]", msg: []string{"out of range"}},
		{name: "array: duplicate across dims (nested)", raw: `[["x"], ["x"]]`, field: "source[1][0]", msg: []string{"used twice", "source[0][0]"}},
		{name: "array: duplicate across dims (bare)", raw: `["x", "x"]`, field: "source[1]", msg: []string{"used twice", "(first at source[0])"}},
		{name: "array: duplicate by index and name", raw: `["x", [0]]`, field: "source[1][0]", msg: []string{"used twice"}},
		{name: "array: overlapping sub-axes", raw: `["x", "x:(1)2"]`, mesh: "x=4", field: "source[1]", msg: []string{"overlaps"}},
		{name: "array: sub-axes that cannot coexist", raw: `[["x:(1)2"], ["x:(3)2"]]`, mesh: "x=6", field: "source[1][0]", msg: []string{"cannot coexist"}},
		{name: "array: invalid sub-axis", raw: `["y:(1)3", null]`, field: "source[0]", msg: []string{"m*k dividing 4"}},
		{name: "array: rank mismatch", raw: `["x", null, null]`, field: "source", msg: []string{"has 3 dims but the tensor has rank 2"}},
		{name: "array: boolean entry", raw: `[true, null]`, field: "source[0]", msg: []string{"must be null, an axis name", "a boolean"}},
		{name: "array: object entry", raw: `[{"axes": ["x"]}, null]`, field: "source[0]", msg: []string{"must be null, an axis name", "an object"}},
		{name: "array: fractional index", raw: `[1.5, null]`, field: "source[0]", msg: []string{"mesh axis index"}},
		{name: "array: null inside a list", raw: `[[null], null]`, field: "source[0][0]", msg: []string{"not null"}},
		{name: "array: list inside a list", raw: `[[["x"]], null]`, field: "source[0][0]", msg: []string{"must be an axis name string"}},
		{name: "array: malformed JSON", raw: `["x", ]`, field: "source", msg: []string{"malformed JSON"}},
		// ---- Shardy text form (offsets into the decoded string) ----
		{name: "text: unknown axis", raw: sharding.JSONString(`[{"x"}, {"q"}]`), field: "source", msg: []string{"at offset 9:", `unknown mesh axis "q"`}},
		{name: "text: unknown axis wrapped", raw: sharding.JSONString(`sharding<@mesh, [{"x"}, {"q"}]>`), field: "source", msg: []string{"at offset 25:", "unknown mesh axis"}},
		{name: "text: duplicate axis", raw: sharding.JSONString(`[{"x"}, {"y", "x"}]`), field: "source", msg: []string{"at offset 14:", `axis "x" is used twice (first at offset 2)`}},
		{name: "text: overlapping sub-axes", raw: sharding.JSONString(`[{"x"}, {"x":(1)2}]`), mesh: "x=4", field: "source", msg: []string{"at offset 9:", "overlaps"}},
		{name: "text: sub-axes that cannot coexist", raw: sharding.JSONString(`[{"x":(1)2}, {"x":(3)2}]`), mesh: "x=6", field: "source", msg: []string{"at offset 14:", "cannot coexist"}},
		{name: "text: invalid sub-axis", raw: sharding.JSONString(`[{"y":(1)1}, {}]`), field: "source", msg: []string{"at offset 2:", "need k > 1"}},
		{name: "text: rank mismatch", raw: sharding.JSONString(`[{"x"}]`), field: "source", msg: []string{"has 1 dims but the tensor has rank 2"}},
		{name: "text: missing brace", raw: sharding.JSONString(`[{"x"}, {"y"]`), field: "source", msg: []string{"at offset 12:", "expected ',' or '}'"}},
		{name: "text: missing bracket", raw: sharding.JSONString(`{"x"}`), field: "source", msg: []string{"at offset 0:", "expected '['"}},
		{name: "text: unterminated name", raw: sharding.JSONString(`[{"x}]`), field: "source", msg: []string{"unterminated axis name"}},
		{name: "text: negative priority", raw: sharding.JSONString(`[{"x"}p-1, {}]`), field: "source", msg: []string{"at offset 7:", "expected a number"}},
		{name: "text: priority too large", raw: sharding.JSONString(`[{"x"}p99999999999, {}]`), field: "source", msg: []string{"at offset 7:", "number 99999999999 is too large"}},
		{name: "text: priority on empty closed dim", raw: sharding.JSONString(`[{}p1, {}]`), field: "source", msg: []string{"at offset 1 (dim 0):", "cannot carry a priority"}},
		{name: "text: mesh name mismatch", raw: sharding.JSONString(`sharding<@other, [{"x"}, {}]>`), field: "source", msg: []string{"at offset 10:", "@other", `"mesh"`}},
		{name: "text: missing wrapper end", raw: sharding.JSONString(`sharding<@mesh, [{"x"}, {}]`), field: "source", msg: []string{"expected '>'"}},
		{name: "text: trailing garbage", raw: sharding.JSONString(`[{"x"}, {}] extra`), field: "source", msg: []string{"at offset 12:", "unexpected"}},
		{name: "text: bad clause", raw: sharding.JSONString(`[{"x"}, {}], sharded={"y"}`), field: "source", msg: []string{"at offset 13:", "replicated={...} or unreduced={...}"}},
		{name: "text: open replicated", raw: sharding.JSONString(`[{"x"}, {}], replicated={?}`), field: "source", msg: []string{"expected '\"'"}},
		{name: "text: replicated + dim reuse", raw: sharding.JSONString(`[{"x"}, {}], replicated={"x"}`), field: "source", msg: []string{"at offset 25:", "used twice"}},
		{name: "text: unreduced + dim reuse", raw: sharding.JSONString(`[{"y"}, {}], unreduced={"y":(1)2}`), field: "source", msg: []string{"at offset 24:", "overlaps"}},
		{name: "text: not sharding<", raw: sharding.JSONString(`shard<@mesh, []>`), field: "source", msg: []string{"at offset 0:"}},
		{name: "text: empty string", raw: `""`, field: "source", msg: []string{"at offset 0:", "expected '['"}},
		// ---- not a sharding at all ----
		{name: "null", raw: `null`, field: "source", msg: []string{"is required"}},
		{name: "empty", raw: ``, field: "source", msg: []string{"is required"}},
		{name: "number", raw: `42`, field: "source", msg: []string{"not a number"}},
		{name: "boolean", raw: `true`, field: "source", msg: []string{"not a boolean"}},
		{name: "garbage", raw: `xyz`, field: "source", msg: []string{"malformed JSON"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mesh := tc.mesh
			if mesh == "" {
				mesh = formsMesh
			}
			m := sharding.MustMesh(t, mesh)
			shape := tc.shape
			if shape == nil {
				shape = []int64{4, 8}
			}
			_, err := sharding.Parse(json.RawMessage(tc.raw), m, shape, "source")
			sharding.RequireFieldError(t, err, tc.field, tc.msg...)
			sharding.RequireOnlyFieldErrors(t, err, "source")
		})
	}
}

// Several independent mistakes are all reported, each on its own field.
func TestParseReportsEveryError(t *testing.T) {
	m := sharding.MustMesh(t, formsMesh)
	_, err := sharding.Parse(json.RawMessage(`{"dims": [{"axes": ["q"]}, {"axes": ["x", 9], "open": 1}], "replicated": ["r"]}`), m, []int64{4, 8}, "source")
	es, ok := sharding.AsFieldErrors(err)
	require.True(t, ok)
	var fields []string
	for _, e := range es {
		fields = append(fields, e.Field)
	}
	assert.ElementsMatch(t, []string{"source.dims[0].axes[0]", "source.dims[1].axes[1]", "source.dims[1].open", "source.replicated[0]"}, fields)
}

func TestParseMeshNameInWrapper(t *testing.T) {
	m, err := sharding.NewMesh("mesh_xy", []sharding.Axis{{"x", 2}, {"y", 4}}, nil)
	require.NoError(t, err)
	s, err := sharding.ParseText(`sharding<@mesh_xy, [{"x"}, {"y"}]>`, m, []int64{4, 8}, "target")
	require.NoError(t, err)
	assert.Equal(t, `sharding<@mesh_xy, [{"x"}, {"y"}]>`, s.Text(m.Name))
	_, err = sharding.ParseText(`sharding<@mesh, [{"x"}, {"y"}]>`, m, []int64{4, 8}, "target")
	sharding.RequireFieldError(t, err, "target", "bound to mesh @mesh", `named "mesh_xy"`)
}

func TestCanonicalForm(t *testing.T) {
	tests := []struct {
		name string
		mesh string
		raw  string
		want string
	}{
		{name: "adjacent sub-axes merge into the full axis", mesh: "x=4", raw: `[["x:(1)2", "x:(2)2"]]`, want: `[{"x"}]`},
		{name: "adjacent sub-axes merge into a bigger sub-axis", mesh: "x=8", raw: `[["x:(1)2", "x:(2)2"]]`, want: `[{"x":(1)4}]`},
		{name: "seed 001: (1)2 and (2)4 of 16 merge to (1)8", mesh: "x=16", raw: sharding.JSONString(`[{"x":(1)2, "x":(2)4}]`), want: `[{"x":(1)8}]`},
		{name: "minor-major order does not merge", mesh: "x=4", raw: `[["x:(2)2", "x:(1)2"]]`, want: `[{"x":(2)2, "x":(1)2}]`},
		{name: "whole axis written as a sub-axis", mesh: "x=4", raw: `["x:(1)4"]`, want: `[{"x"}]`},
		{name: "replicated in mesh order", mesh: "c=2,a=2,b=2", raw: sharding.JSONString(`[{}], replicated={"a", "c"}`), want: `[{}], replicated={"c", "a"}`},
		{name: "seed 001: replicated sub-axes by pre-size", mesh: "x=2,y=8,z=2", raw: sharding.JSONString(`[{}, {"z"}], replicated={"y":(4)2, "x", "y":(1)2}`),
			want: `[{}, {"z"}], replicated={"x", "y":(1)2, "y":(4)2}`},
		{name: "replicated sub-axes merge after sorting", mesh: "x=4,y=2", raw: `{"dims": [{}], "replicated": ["x:(2)2", "y", "x:(1)2"]}`, want: `[{}], replicated={"x", "y"}`},
		{name: "unreduced in mesh order and merged", mesh: "x=4,y=2", raw: `{"dims": [{}], "unreduced": ["y", "x:(2)2", "x:(1)2"]}`, want: `[{}], unreduced={"x", "y"}`},
		{name: "dims keep their order", mesh: "x=2,y=2", raw: `[["y", "x"]]`, want: `[{"y", "x"}]`},
		{name: "seed 001 priorities", mesh: "w=6,x=2,y=4,z=2", raw: sharding.JSONString(`sharding<@mesh, [{"x"}p1, {"y"}, {"z",?}p2], replicated={}>`), want: `[{"x"}p1, {"y"}, {"z", ?}p2]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sharding.MustMesh(t, tc.mesh)
			s := sharding.MustParse(t, tc.raw, m, nil)
			assert.Equal(t, tc.want, s.Body())
			again := sharding.MustParse(t, sharding.JSONString(s.Body()), m, nil)
			assert.True(t, s.Equal(again))
		})
	}
}

// print then parse round-trips, in every form, for hand-picked shardings.
func TestRoundTripForms(t *testing.T) {
	m := sharding.MustMesh(t, "x=2,y=8,z=6,w=1")
	bodies := []string{
		`[]`,
		`[{}]`,
		`[{"x"}, {"z", "y"}]`,
		`[{"x", ?}p0, {?}p7, {}]`,
		`[{"y":(2)2}, {"y":(1)2, "z":(2)3}], replicated={"x", "y":(4)2}, unreduced={"z":(1)2}`,
		`[{"w"}, {"z":(3)2, "x"}], unreduced={"y"}`,
	}
	for _, body := range bodies {
		t.Run(body, func(t *testing.T) {
			s, err := sharding.ParseText(body, m, nil, "source")
			require.NoError(t, err)
			assert.Equal(t, body, s.Body())
			forms := map[string]string{
				"text":    sharding.JSONString(s.Text(m.Name)),
				"body":    sharding.JSONString(s.Body()),
				"object":  sharding.MustJSON(t, s.Object(m.Name)),
				"objectN": sharding.MustJSON(t, withoutText(s.Object(m.Name))),
			}
			if spec, ok := s.PartitionSpec(); ok {
				forms["array"] = sharding.MustJSON(t, spec)
			}
			for name, raw := range forms {
				got, err := sharding.Parse(json.RawMessage(raw), m, nil, "source")
				require.NoError(t, err, "%s: %s", name, raw)
				assert.True(t, s.Equal(got), "%s: %s -> %s", name, raw, got)
			}
		})
	}
}

func withoutText(o sharding.ObjectForm) sharding.ObjectForm { o.Text = ""; return o }

func TestObjectAndPartitionSpec(t *testing.T) {
	m := sharding.MustMesh(t, formsMesh)
	s := sharding.MustParse(t, sharding.JSONString(`[{"x"}, {"z", "y", ?}p1], replicated={"w"}, unreduced={"u"}`), m, nil)
	assert.JSONEq(t, `{"dims": [{"axes": ["x"]}, {"axes": ["z", "y"], "open": true, "priority": 1}], "replicated": ["w"], "unreduced": ["u"],
		"text": "sharding<@mesh, [{\"x\"}, {\"z\", \"y\", ?}p1], replicated={\"w\"}, unreduced={\"u\"}>"}`, sharding.MustJSON(t, s.Object(m.Name)))
	_, ok := s.PartitionSpec()
	assert.False(t, ok, "open dims, priorities, replicated and unreduced have no array form")

	s = sharding.MustParse(t, `["x", null, ["z", "y:(2)2"]]`, m, nil)
	spec, ok := s.PartitionSpec()
	require.True(t, ok)
	assert.JSONEq(t, `["x", null, ["z", "y:(2)2"]]`, sharding.MustJSON(t, spec))
	assert.JSONEq(t, `{"dims": [{"axes": ["x"]}, {"axes": []}, {"axes": ["z", "y:(2)2"]}], "text": "sharding<@mesh, [{\"x\"}, {}, {\"z\", \"y\":(2)2}]>"}`, sharding.MustJSON(t, s.Object(m.Name)))
}

func TestShardingValidate(t *testing.T) {
	m := sharding.MustMesh(t, "x=4,y=6")
	tests := []struct {
		name  string
		s     sharding.Sharding
		shape []int64
		field string
		msg   string
	}{
		{name: "valid", s: sharding.Sharding{Dims: []sharding.DimSharding{{Axes: []sharding.AxisRef{sub("x", 1, 2, 4)}, Priority: sharding.NoPriority}, {Axes: []sharding.AxisRef{full("y", 6)}, Priority: 2}}}, shape: []int64{3, 5}},
		{name: "unknown axis", s: sharding.Sharding{Dims: []sharding.DimSharding{{Axes: []sharding.AxisRef{full("q", 2)}, Priority: sharding.NoPriority}}}, field: "dims[0].axes[0]", msg: "unknown mesh axis"},
		{name: "wrong Of", s: sharding.Sharding{Dims: []sharding.DimSharding{{Axes: []sharding.AxisRef{full("x", 8)}, Priority: sharding.NoPriority}}}, field: "dims[0].axes[0]", msg: "the mesh says 4"},
		{name: "invalid sub-axis", s: sharding.Sharding{Replicated: []sharding.AxisRef{sub("y", 4, 2, 6)}}, field: "replicated[0]", msg: "invalid"},
		{name: "size one of big axis", s: sharding.Sharding{Unreduced: []sharding.AxisRef{sub("y", 2, 1, 6)}}, field: "unreduced[0]", msg: "invalid"},
		{name: "overlap", s: sharding.Sharding{Dims: []sharding.DimSharding{{Axes: []sharding.AxisRef{full("x", 4)}, Priority: sharding.NoPriority}}, Unreduced: []sharding.AxisRef{sub("x", 2, 2, 4)}}, field: "unreduced[0]", msg: "overlaps"},
		{name: "negative priority", s: sharding.Sharding{Dims: []sharding.DimSharding{{Axes: []sharding.AxisRef{full("x", 4)}, Priority: -3}}}, field: "dims[0]", msg: "priority -3 is negative"},
		{name: "rank", s: sharding.Replicated(2), shape: []int64{1}, field: "dims", msg: "rank 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate(m, tc.shape, "")
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			sharding.RequireFieldError(t, err, tc.field, tc.msg)
		})
	}
}

func TestShardingHelpers(t *testing.T) {
	m := sharding.MustMesh(t, "x=2,y=4,z=2")
	s := sharding.MustParse(t, sharding.JSONString(`[{"x", ?}p1, {"z", "y"}]`), m, nil)
	require.NoError(t, s.Validate(m, []int64{3, 9}, ""))
	assert.Equal(t, []int{2, 8}, s.ShardCounts())
	assert.Equal(t, 2, s.Rank())
	assert.False(t, s.IsFullyReplicated())
	assert.True(t, sharding.Replicated(3).IsFullyReplicated())
	assert.False(t, sharding.Sharding{Dims: make([]sharding.DimSharding, 1), Unreduced: []sharding.AxisRef{full("x", 2)}}.IsFullyReplicated())
	assert.Equal(t, []sharding.AxisRef{full("x", 2), full("z", 2), full("y", 4)}, s.UsedAxes())

	c := s.Clone()
	require.True(t, c.Equal(s))
	c.Dims[1].Axes[0] = full("x", 2)
	assert.Equal(t, full("z", 2), s.Dims[1].Axes[0], "Clone is deep")

	closed := s.Clone()
	closed.Dims[0].Open, closed.Dims[0].Priority = false, sharding.NoPriority
	assert.False(t, s.Equal(closed))
	assert.True(t, s.SameLayout(closed), "open and priority do not place data")
	rep := closed.Clone()
	rep.Replicated = []sharding.AxisRef{full("y", 4)}
	assert.False(t, closed.Equal(rep))
	assert.True(t, closed.SameLayout(rep))
	unr := closed.Clone()
	unr.Unreduced = []sharding.AxisRef{full("y", 4)}
	assert.False(t, closed.SameLayout(unr))
	assert.Equal(t, s.Body(), s.String())
}
