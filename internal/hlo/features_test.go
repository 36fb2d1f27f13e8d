package hlo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

func analyzeText(t *testing.T, src string, mesh string) *Analysis {
	t.Helper()
	m, err := Parse(src, Limits{})
	require.NoError(t, err)
	model, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	var me *sharding.Mesh
	if mesh != "" {
		me, err = sharding.ParseMeshString(mesh, "mesh")
		require.NoError(t, err)
	}
	a, err := Analyze(context.Background(), m, Options{Mesh: me, Model: model})
	require.NoError(t, err)
	return a
}

// loopModule: an all-reduce in a while loop of 4 trips (known_trip_count), an
// all-gather in a loop of 3 trips (read off its condition, init and step) nested in
// it, and one outside every loop.
const loopModule = `HloModule loops, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

inner_cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

inner_body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  slice = f32[2] slice(x), slice={[0:2]}
  ag = f32[8] all-gather(slice), replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT t = (s32[], f32[8]) tuple(next, ag)
}

outer_cond {
  p = (s32[], f32[8]) parameter(0)
  ROOT c = pred[] constant(true)
}

outer_body {
  p = (s32[], f32[8]) parameter(0)
  x = f32[8] get-tuple-element(p), index=1
  ar = f32[8] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=add
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, ar)
  w = (s32[], f32[8]) while(init), condition=inner_cond, body=inner_body
  i = s32[] get-tuple-element(p), index=0
  y = f32[8] get-tuple-element(w), index=1
  ROOT t = (s32[], f32[8]) tuple(i, y)
}

ENTRY main {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(init), condition=outer_cond, body=outer_body, backend_config={"known_trip_count":{"n":"4"}}
  y = f32[8] get-tuple-element(w), index=1
  ROOT once = f32[8] all-reduce(y), replica_groups={{0,1,2,3}}, to_apply=add
}
`

func TestLoopsMultiply(t *testing.T) {
	a := analyzeText(t, loopModule, "")
	runs := map[string]int64{}
	var single float64
	for _, c := range a.Collectives {
		runs[c.Name] = c.TripCount
		assert.True(t, c.TripCountKnown, c.Name)
		assert.InDelta(t, c.Cost.TimeUS*float64(c.TripCount), c.TimeUS(), 1e-9)
		if c.Name == "once" {
			single = c.Cost.TimeUS
		}
	}
	assert.Equal(t, map[string]int64{"ar": 4, "ag": 12, "once": 1}, runs)
	require.Positive(t, single)
	var sum float64
	for _, c := range a.Collectives {
		sum += c.Cost.TimeUS * float64(runs[c.Name])
	}
	assert.InDelta(t, sum, a.TimeUS, 1e-9)

	// Without the known_trip_count the outer loop's count is not known: counted once.
	b := analyzeText(t, strings.Replace(loopModule, `, backend_config={"known_trip_count":{"n":"4"}}`, "", 1), "")
	for _, c := range b.Collectives {
		switch c.Name {
		case "ar":
			assert.Equal(t, int64(1), c.TripCount)
			assert.False(t, c.TripCountKnown)
			assert.Contains(t, c.TripCountNote, "while %w is not known")
		case "ag":
			assert.Equal(t, int64(3), c.TripCount)
			assert.False(t, c.TripCountKnown)
		}
	}
}

// TestTripCount reads the induction variable of loops of every direction.
func TestTripCount(t *testing.T) {
	cases := []struct {
		init, step, limit int
		dir               string
		want              int64
	}{
		{0, 1, 25, "LT", 25}, {0, 1, 25, "LE", 26}, {2, 3, 11, "LT", 3}, {10, -1, 0, "GT", 10}, {10, -2, 0, "GE", 6}, {0, 1, 8, "NE", 8}, {5, 1, 2, "LT", 0},
	}
	for _, tc := range cases {
		op := "add"
		step := tc.step
		if step < 0 {
			op, step = "subtract", -step
		}
		src := fmt.Sprintf(`HloModule t
cond {
  p = (s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(%d)
  ROOT c = pred[] compare(i, n), direction=%s
}
body {
  p = (s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  k = s32[] constant(%d)
  j = s32[] %s(i, k)
  ROOT t = (s32[]) tuple(j)
}
ENTRY e {
  c = s32[] constant(%d)
  init = (s32[]) tuple(c)
  ROOT w = (s32[]) while(init), condition=cond, body=body
}
`, tc.limit, tc.dir, step, op, tc.init)
		m, err := Parse(src, Limits{})
		require.NoError(t, err)
		n, ok := m.TripCount(m.Entry, m.Entry.Instr("w"))
		assert.True(t, ok, "%+v", tc)
		assert.Equal(t, tc.want, n, "%+v", tc)
	}
}

// TestPrintedForms: the forms XLA's printer and JAX and torch_xla print parse as pasted
// and read right.
func TestPrintedForms(t *testing.T) {
	src := `HloModule forms, entry_computation_layout={(f32[1, 1024]{1,0:T(8,128)})->f32[8,1024]{1,0}}

// a comment line
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}, execution_thread="main"

ENTRY main {
  p0 = f32[1, 1024]{1,0:T(8,128)} parameter(0) /* inline comment */
  ag = f32[8,1024]{1,0:T(8,128)S(1)} all-gather(p0),
      replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_0','axis_1'},
      dimensions={0}, frontend_attributes={_xla_stream="1"},
      backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"collective_backend_config":{"is_sync":false}}
  t = (f32[8,1024], /*index=1*/f32[1,1024]) tuple(ag, p0)
  g = get-tuple-element(t), index=0
  rss = ((f32[8,1024]), f32[1,1024]) reduce-scatter-start(g), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, to_apply=add
  ROOT rsd = f32[1,1024] reduce-scatter-done(rss)
}
`
	a := analyzeText(t, src, "")
	require.Len(t, a.Collectives, 2)
	ag, rs := a.Collectives[0], a.Collectives[1]
	assert.Equal(t, int64(8*1024*4), ag.OutBytes)
	assert.Equal(t, int64(1024*4), ag.InBytes, "p0 resolved without a %%")
	assert.Equal(t, "axis_0,axis_1", axesText(ag.MeshAxes))
	assert.Equal(t, MeshFromNamedMesh, a.MeshSource)
	assert.Equal(t, 8, a.Devices)
	assert.Equal(t, "reduce-scatter-start", rs.Opcode)
	assert.Equal(t, cost.ReduceScatter, rs.Kind)
	assert.Equal(t, int64(8*1024*4), rs.InBytes, "the untyped get-tuple-element's shape inferred")
	assert.Equal(t, int64(1024*4), rs.OutBytes)
	assert.Positive(t, rs.Cost.TimeUS)
	assert.Equal(t, "main", a.Module.Computation("add").ExecutionThread)
}

// TestNamedMeshGroups decodes the named form by hand: a 2x4 mesh, device ids a 4x2
// transposed iota.
func TestNamedMeshGroups(t *testing.T) {
	cases := []struct {
		text string
		want [][]int
	}{
		{"mesh['x'=2,'y'=4] {'y'}", [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}},
		{"mesh['x'=2,'y'=4] {'x'}", [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
		{"mesh['x'=2,'y'=4] {'y','x'}", [][]int{{0, 4, 1, 5, 2, 6, 3, 7}}},
		{"mesh['x'=2,'y'=4] {'y:(1)2'}", [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
		{"mesh['x'=2,'y'=4] {'y:(2)2'}", [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
		{"mesh['x'=2,'y'=4], device_ids=([2,4]<=[4,2]T(1,0)) {'y'}", [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}}},
		{"mesh['x'=2,'y'=2], device_ids=(3,2,1,0) {'x'}", [][]int{{3, 1}, {2, 0}}},
	}
	for _, tc := range cases {
		got, err := ParseGroups(tc.text, 64)
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.want, got, tc.text)
	}
	for text, want := range map[string]string{
		"mesh['x'=2] {'z'}":      "axis \"z\" is not one of",
		"mesh['x'=4] {'x:(2)4'}": "sub-axis",
		"mesh['x'=2] 'x'":        "expected {'axis',...}",
	} {
		_, err := ParseGroups(text, 64)
		assert.ErrorContains(t, err, want, text)
	}
}

// TestStackFrames: a current JAX dump's stack_frame_id resolves to the file, line and
// function of the op.
func TestStackFrames(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "corpus", "jax", "shardy_megatron_stackframes.hlo"))
	require.NoError(t, err)
	a := analyzeText(t, string(src), "")
	require.Len(t, a.Collectives, 2)
	file := "/home/yho_google_com/Documents/GitHub/sandbox/scripts/jax_shardy_propagation_partitioning.py"
	for _, c := range a.Collectives {
		require.NotNil(t, c.Location, c.Name)
		assert.Equal(t, SourceLocation{File: file, Line: 63, Function: "main.<locals>.f"}, *c.Location, c.Name)
	}
	// The dump's mesh is dp=2,tp=4: inferred from the shardings' tile assignments.
	assert.Equal(t, "axis_0=2,axis_1=4", meshText(a.Mesh))
	assert.Equal(t, "axis_1", axesText(a.Collectives[0].MeshAxes), "the all-gather runs over tp")
}

// TestNothingSilent: what communicates is priced or listed unmodeled; a misspelled
// opcode is refused where it is.
func TestNothingSilent(t *testing.T) {
	src := `HloModule m
ENTRY e {
  p = f32[8,16] parameter(0)
  cb = f32[8,16] collective-broadcast(p), replica_groups={{0,1,2,3}}
  cc = f32[8,16] custom-call(cb), custom_call_target="MyAllReduce"
  tok = token[] after-all()
  s = (f32[8,16], u32[], token[]) send(p, tok), channel_id=5, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,2},{2,3}}"}
  sd = token[] send-done(s), channel_id=5
  r = (f32[8,16], u32[], token[]) recv(tok), channel_id=5, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,2},{2,3}}"}
  rd = (f32[8,16], token[]) recv-done(r), channel_id=5
  ROOT out = f32[8,16] get-tuple-element(rd), index=0
}
`
	a := analyzeText(t, src, "")
	require.Len(t, a.Unmodeled, 2)
	assert.Equal(t, "collective-broadcast", a.Unmodeled[0].Opcode)
	assert.Equal(t, 4, a.Unmodeled[0].Line)
	assert.Equal(t, "custom-call", a.Unmodeled[1].Opcode)
	require.Len(t, a.Collectives, 1, "the send is priced, its recv with it")
	s := a.Collectives[0]
	assert.Equal(t, "send", s.Opcode)
	assert.Equal(t, int64(8*16*4), s.InBytes)
	assert.Equal(t, [][2]int{{0, 1}, {1, 2}, {2, 3}}, s.Pairs)
	assert.Positive(t, s.Cost.TimeUS)
	assert.Equal(t, 4, a.Devices)

	_, err := Parse(strings.Replace(src, "collective-broadcast(", "colective-broadcast(", 1), Limits{})
	assert.ErrorContains(t, err, `line 4, column 18: unknown opcode "colective-broadcast"`)
}

// TestGroupsOffTheMesh: groups that match no axes are priced on their devices, never 0.
func TestGroupsOffTheMesh(t *testing.T) {
	src := `HloModule m, num_partitions=8
ENTRY e {
  p = f32[1024] parameter(0)
  ROOT ag = f32[4096] all-gather(p), replica_groups={{0,3,5,6},{1,2,4,7}}, dimensions={0}
}
`
	a := analyzeText(t, src, "x=2,y=4")
	c := a.Collectives[0]
	assert.Nil(t, c.MeshAxes)
	assert.Contains(t, c.AxesNote, "priced on its groups of 4 devices as a ring")
	assert.Positive(t, c.Cost.TimeUS)
}

// TestBadModules: what XLA would refuse is a 400 naming the place.
func TestBadModules(t *testing.T) {
	base := "HloModule m, num_partitions=4\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT ag = f32[32] all-gather(p), replica_groups=%s, dimensions=%s\n}\n"
	for _, tc := range []struct{ groups, dims, want string }{
		{"{{0,1,2,3}}", "{99}", "line 4, column 75: %ag: dimensions: 99 is not a dimension of the rank-1 operand"},
		{"{{0,1,2,1}}", "{0}", "replica_groups: device 1 is listed twice in group 0"},
		{"{{0,1},{1,2}}", "{0}", "replica_groups: device 1 is in groups 0 and 1"},
	} {
		m, err := Parse(fmt.Sprintf(base, tc.groups, tc.dims), Limits{})
		require.NoError(t, err)
		_, err = Analyze(context.Background(), m, Options{})
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := Parse("HloModule m\n", Limits{})
	assert.ErrorContains(t, err, "the module has no computations")
	_, err = Parse("HloModule m\nENTRY e {\n  p = f32[8] parameter(0)\n\nENTRY f {\n}\n", Limits{})
	assert.ErrorContains(t, err, "line 5, column 1: expected '}' closing computation %e (line 2)")
}

// TestMeshChecked: a mesh that does not split the parameters' device layout is refused
// naming the one that does; without a mesh that one is used.
func TestMeshChecked(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "seed003_case4.hlo"))
	require.NoError(t, err)
	m, err := Parse(string(src), Limits{})
	require.NoError(t, err)
	for _, bad := range []string{"C=1,D=2,X=4,Y=8,T=4", "x=256", "x=16,y=16"} {
		mesh, err := sharding.ParseMeshString(bad, "mesh")
		require.NoError(t, err)
		_, err = Analyze(context.Background(), m, Options{Mesh: mesh})
		assert.ErrorContains(t, err, "mesh: the mesh "+bad+" does not fit parameter %param's sharding", bad)
		assert.ErrorContains(t, err, "a mesh that fits: axis_0=2,axis_1=8,axis_2=4,axis_3=4", bad)
	}
	model, _ := cost.Profile("tpu-v5p")
	inferred, err := Analyze(context.Background(), m, Options{Model: model})
	require.NoError(t, err)
	mesh, _ := sharding.ParseMeshString("C=1,D=2,Y=8,X=4,T=4", "mesh")
	given, err := Analyze(context.Background(), m, Options{Mesh: mesh, Model: model})
	require.NoError(t, err)
	assert.InDelta(t, given.TimeUS, inferred.TimeUS, 1e-9, "the inferred mesh prices as the seed's")
	assert.InDelta(t, 149.35, inferred.TimeUS, 0.005)
	assert.Equal(t, MeshFromShardings, inferred.MeshSource)
}

// TestModuleLineCol: the module's line index agrees with a scan of the text.
func TestModuleLineCol(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "seed003_case4.hlo"))
	require.NoError(t, err)
	m, err := Parse(string(src), Limits{})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		off := r.IntN(len(src) + 10)
		l1, c1 := m.LineCol(off)
		l2, c2 := LineCol(string(src), off)
		require.Equal(t, [2]int{l2, c2}, [2]int{l1, c1}, "offset %d", off)
	}
}

// TestAsyncWrapper: an async-start that calls a computation holding the collective (as
// XLA prints async ops without its "<op>-start" sugar) prices the wrapped collective
// once, with its own operand and result.
func TestAsyncWrapper(t *testing.T) {
	src := `HloModule m, num_partitions=8

%async_computation (param_0: f32[1024]) -> f32[8192] {
  %param_0 = f32[1024]{0} parameter(0)
  ROOT %ag = f32[8192]{0} all-gather(f32[1024]{0} %param_0), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
}, execution_thread="main"

ENTRY %main (p: f32[1024]) -> f32[8192] {
  %p = f32[1024]{0} parameter(0)
  %ags = ((f32[1024]{0}), f32[8192]{0}, s32[]) async-start(f32[1024]{0} %p), calls=%async_computation
  ROOT %agd = f32[8192]{0} async-done(((f32[1024]{0}), f32[8192]{0}, s32[]) %ags)
}
`
	a := analyzeText(t, src, "")
	require.Len(t, a.Collectives, 1)
	c := a.Collectives[0]
	assert.Equal(t, "async_computation", c.Computation)
	assert.Equal(t, int64(4096), c.InBytes)
	assert.Equal(t, int64(32768), c.OutBytes)
	assert.Equal(t, int64(1), c.TripCount)
	assert.Positive(t, c.Cost.TimeUS)
	assert.Empty(t, a.Unmodeled)
}

// TestSendRecvStart: the async send-start/recv-start XLA prints for a combined
// send/recv is one transfer, priced at the send.
func TestSendRecvStart(t *testing.T) {
	src := `HloModule m
ENTRY main {
  data = f32[8] parameter(0)
  tok = token[] after-all()
  rs = ((token[]), (f32[8], u32[], token[]), s32[]) recv-start(tok), channel_id=1, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1}}"}
  ss = ((f32[8], token[]), (f32[8], u32[], token[]), s32[]) send-start(data, tok), channel_id=1, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1}}"}
  rd = (f32[8], u32[], token[]) recv-done(rs)
  sd = (f32[8], u32[], token[]) send-done(ss)
  ROOT out = f32[8] get-tuple-element(rd), index=0
}
`
	a := analyzeText(t, src, "")
	require.Len(t, a.Collectives, 1)
	c := a.Collectives[0]
	assert.Equal(t, "send-start", c.Opcode)
	assert.Equal(t, int64(32), c.InBytes)
	assert.Equal(t, int64(32), c.OutBytes)
	assert.Equal(t, [][2]int{{0, 1}}, c.Pairs)
	assert.Positive(t, c.Cost.TimeUS)
	assert.Empty(t, a.Unmodeled)
}

// TestDevicesFromShapes: without a header's counts, groups of every device take their
// size from an all-gather's shapes (XLA's tests write them so).
func TestDevicesFromShapes(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "corpus", "xla", "ag_combiner_by_dimension.hlo"))
	require.NoError(t, err)
	a := analyzeText(t, string(src), "")
	assert.Equal(t, 4, a.Devices)
	assert.Contains(t, a.DevicesNote, "the shapes of %allgather")
	for _, c := range a.Collectives {
		assert.Equal(t, 4, c.GroupSize, c.Name)
		assert.Positive(t, c.Cost.TimeUS, c.Name)
	}
}
