package sharding_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardplan/shardplan/internal/sharding"
)

func TestPartitionSpecText(t *testing.T) {
	m := sharding.MustMesh(t, "D=2,X=4,Y=2")
	cases := []struct {
		s, want string
		ok      bool
	}{
		{`["D",["X","Y"]]`, "P('D', ('X','Y'))", true},
		{`[null,"X"]`, "P(None, 'X')", true},
		{`[null,null]`, "P(None, None)", true},
		{`["X:(1)2",null]`, "", false},
		{`{"dims":[{"axes":["D"]},{"axes":[]}],"unreduced":["X"]}`, "P('D', None, unreduced={'X'})", true},
		{`{"dims":[{"axes":["D"], "open": true},{"axes":[], "priority": 0, "open": true}],"replicated":["X"]}`, "P('D', None)", true},
	}
	for _, tc := range cases {
		got, ok := sharding.MustParse(t, tc.s, m, nil).PartitionSpecText()
		assert.Equal(t, tc.ok, ok, tc.s)
		assert.Equal(t, tc.want, got, tc.s)
	}
}

// TestParsePartitionSpec checks the PartitionSpec forms (text and array) against Shardy's.
func TestParsePartitionSpec(t *testing.T) {
	m := sharding.MustMesh(t, "x=2,y=2,z=2")
	cases := []struct {
		name, raw, want string
		shape           []int64
	}{
		{"text", `"P('x', None, ('y','z'))"`, `[{"x"}, {}, {"y", "z"}]`, []int64{4, 4, 4}},
		{"PartitionSpec", `"PartitionSpec(\"x\", None, (\"y\", \"z\",),)"`, `[{"x"}, {}, {"y", "z"}]`, []int64{4, 4, 4}},
		{"qualified", `"jax.sharding.PartitionSpec('y')"`, `[{"y"}, {}]`, []int64{4, 4}},
		{"padded text", `"P('x')"`, `[{"x"}, {}, {}]`, []int64{4, 4, 4}},
		{"empty P", `"P()"`, `[{}, {}]`, []int64{4, 4}},
		{"padded array", `["x"]`, `[{"x"}, {}]`, []int64{4, 4}},
		{"padded empty array", `[]`, `[{}, {}]`, []int64{4, 4}},
		{"unconstrained", `"P(P.UNCONSTRAINED, 'x')"`, `[{?}, {"x"}]`, []int64{4, 4}},
		{"unreduced", `"P('x', unreduced={'y'})"`, `[{"x"}, {}], unreduced={"y"}`, []int64{4, 4}},
		{"sub-axis", `"P('x', 'y:(1)2')"`, `[{"x"}, {"y"}]`, []int64{4, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sharding.RequireShardy(t, sharding.MustParse(t, tc.raw, m, tc.shape), m, tc.shape, tc.want)
		})
	}
}

func TestParsePartitionSpecErrors(t *testing.T) {
	m := sharding.MustMesh(t, "x=2,y=2")
	cases := []struct {
		name, text string
		want       []string
	}{
		{"too many entries", `P('x', None, 'y')`, []string{"3 dims", "rank 2"}},
		{"unknown axis", `P('q')`, []string{"at offset 2", `unknown mesh axis "q"`}},
		{"axis twice", `P('x', 'x')`, []string{"at offset 7", "used twice"}},
		{"bare word", `P(x)`, []string{"at offset 2", `unexpected "x"`}},
		{"unterminated", `P('x'`, []string{"at offset 5", "found the end"}},
		{"entry after unreduced", `P(unreduced={'x'}, 'y')`, []string{"at offset 19", "positional entries come first"}},
		{"trailing", `P('x') P`, []string{"at offset 7", "after the PartitionSpec"}},
		{"unquoted in tuple", `P((x,))`, []string{"at offset 3", "quoted axis name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sharding.ParsePartitionSpecText(tc.text, m, []int64{4, 4}, "source")
			sharding.RequireFieldError(t, err, "source", tc.want...)
		})
	}
}

// TestParseJAXRepr: what jax.Array.sharding prints is accepted as it is.
func TestParseJAXRepr(t *testing.T) {
	m := sharding.MustMesh(t, "data=2,model=4")
	shape := []int64{8, 8}
	cases := []struct{ name, text, want string }{
		{"NamedSharding", "NamedSharding(mesh=Mesh('data': 2, 'model': 4, axis_types=(Auto, Auto)), spec=PartitionSpec('data', None), memory_kind=device)", `[{"data"}, {}]`},
		{"NamedSharding tuple entry", "NamedSharding(mesh=Mesh('data': 2, 'model': 4), spec=PartitionSpec(('data', 'model'),))", `[{"data", "model"}, {}]`},
		{"old mesh repr", "NamedSharding(mesh=Mesh(device_ids=array([[0, 1, 2, 3], [4, 5, 6, 7]]), axis_names=('data', 'model')), spec=PartitionSpec(None, 'model'))", `[{}, {"model"}]`},
		{"GSPMDSharding", "GSPMDSharding({devices=[2,1,4]<=[8] last_tile_dim_replicate}, memory_kind=device)", `[{"data"}, {}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sharding.RequireShardy(t, sharding.MustParse(t, sharding.JSONString(tc.text), m, shape), m, shape, tc.want)
		})
	}
	_, err := sharding.Parse([]byte(sharding.JSONString("NamedSharding(mesh=Mesh('data': 2, 'model': 8), spec=PartitionSpec('data'))")), m, shape, "source")
	sharding.RequireFieldError(t, err, "source", "at offset 14", "data=2,model=8", "data=2,model=4")
	_, err = sharding.Parse([]byte(sharding.JSONString("NamedSharding(mesh=Mesh('data': 2, 'model': 4), spec=PartitionSpec('q'))")), m, shape, "source")
	sharding.RequireFieldError(t, err, "source", "at offset 67", `unknown mesh axis "q"`)
	_, err = sharding.Parse([]byte(sharding.JSONString("NamedSharding(mesh=Mesh('data': 2, 'model': 4))")), m, shape, "source")
	sharding.RequireFieldError(t, err, "source", "without spec=")
	_, err = sharding.Parse([]byte(sharding.JSONString("GSPMDSharding({devices=[2,1,4]<=[8] last_tile_dim_replicate} x")), m, shape, "source")
	sharding.RequireFieldError(t, err, "source", "expected ',' or ')'")
}
