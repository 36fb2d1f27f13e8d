package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/testgen"
)

// renderGraph plans body and returns the rendered answer (before encoding).
func renderGraph(t *testing.T, s *Server, body string) *GraphResponse {
	t.Helper()
	in, err := prepareGraphKeyed(s, []byte(body))
	require.NoError(t, err)
	resp, err := s.planGraph(context.Background(), in)
	require.NoError(t, err)
	return resp
}

// requireSameAsEncodingJSON checks that the graph encoder writes r byte for byte as
// encoding/json does.
func requireSameAsEncodingJSON(t *testing.T, r *GraphResponse) {
	t.Helper()
	want, err := encodeJSON(r)
	require.NoError(t, err)
	e := jsonAppender{}
	e.graph(r)
	require.NoError(t, e.err)
	if string(e.b) != string(want) {
		i := 0
		for i < len(want) && i < len(e.b) && want[i] == e.b[i] {
			i++
		}
		lo := max(i-80, 0)
		t.Fatalf("differs at byte %d of %d:\n got  %.200q\n want %.200q", i, len(want), e.b[lo:min(i+80, len(e.b))], want[lo:min(i+80, len(want))])
	}
}

func TestGraphJSONExamples(t *testing.T) {
	s := newTestServer(t, nil)
	bodies := graphBodies(t)
	bodies["transformer-2"] = testgen.TransformerGraphJSON(2)
	for name, body := range bodies {
		for _, include := range []string{"", `"include":["ops","pairs"],`} {
			if include != "" && strings.Contains(body, `"include"`) {
				continue // it says already
			}
			t.Run(fmt.Sprintf("%s/include=%t", name, include != ""), func(t *testing.T) {
				b := body
				if include != "" {
					b = "{" + include + strings.TrimPrefix(strings.TrimSpace(b), "{")
				}
				requireSameAsEncodingJSON(t, renderGraph(t, s, b))
			})
		}
	}
}

// TestGraphJSONRandom fills every hand-written member with random values (strings
// with control bytes, <>&, quotes, unicode, U+2028, invalid UTF-8; floats across the
// exponent cutoffs; nil and empty lists) and compares with encoding/json.
func TestGraphJSONRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 9))
	for i := range 300 {
		g := randomGraph(rng)
		t.Run(fmt.Sprint(i), func(t *testing.T) { requireSameAsEncodingJSON(t, g) })
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a<b>&c", "\u2028\u2029", "\x00\x1f\x7f\"\\", "\xff\xe4\xb8", "é世🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := encodeJSON(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString(nil, s, false)))
	})
}

func TestGraphJSONFloats(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e21, -3e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 123456.789} {
		want, err := encodeJSON(f)
		require.NoError(t, err)
		e := jsonAppender{}
		e.float(f)
		require.Equal(t, string(want), string(e.b), "%g", f)
	}
	e := jsonAppender{}
	e.float(math.NaN())
	require.ErrorIs(t, e.err, errNotFast)
	// A NaN anywhere makes the answer encoding/json's (and its error).
	_, err := encodeGraphJSON(&GraphResponse{Collectives: []GraphCollective{{TimeUS: math.Inf(1)}}})
	var uv *json.UnsupportedValueError
	require.ErrorAs(t, err, &uv)
}

// TestAppendInt: appendInt writes what strconv does, across its digit-count cases and
// at the ends of int64.
func TestAppendInt(t *testing.T) {
	check := func(n int64) {
		if got, want := string(appendInt([]byte("x"), n)), "x"+strconv.FormatInt(n, 10); got != want {
			t.Fatalf("appendInt(%d) = %q, want %q", n, got, want)
		}
	}
	for n := int64(-1100); n <= 21000; n++ {
		check(n)
	}
	for _, n := range []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, 99999, 100000, 1 << 40, math.MaxInt64} {
		check(n)
	}
}

// TestGraphJSONKnowsEveryField fails when a hand-written type (of the graph and the
// reshard answers) gains, loses or renames a member: its encoder (in graph.go,
// reshard.go or planjson.go) must then be changed with it.
func TestGraphJSONKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		v    any
		tags string
	}{
		{GraphResponse{}, "plan_id mesh shardings collectives summary explain refined ops,omitempty stats lists_omitted,omitempty note,omitempty opaque_ops,omitempty"},
		{ShardingJSON{}, "dims replicated,omitempty unreduced,omitempty text hlo partition_spec,omitempty"},
		{DimShardingJSON{}, "axes open,omitempty priority,omitempty"},
		{ExplainEntry{}, "dim axes from"},
		{GraphCollective{}, "op_name tensor kind reduction,omitempty mesh_axes,omitempty dim,omitempty shape plan,omitempty steps,omitempty time_us bytes_per_device full_rematerialization xla_fallback,omitempty"},
		{GraphPlan{}, "source target steps summary suggested_constraints,omitempty suggestion_note,omitempty xla_warning,omitempty xla_path,omitempty"},
		{Suggestion{}, "partition_spec,omitempty sharding"},
		{SummaryJSON{}, "strategy cost_model collectives time_us bytes_per_device lower_bound_bytes_per_device efficiency time_lower_bound_us time_efficiency peak_bytes_per_device full_rematerialization xla_fallback,omitempty optimality,omitempty optimality_gap_us,omitempty search_expansions candidates,omitempty"},
		{ReshardResponse{}, "plan_id mesh shape source target steps summary suggested_constraints suggestion_note,omitempty xla_warning,omitempty xla_path,omitempty source_hlo,omitempty target_hlo,omitempty tiles,omitempty transfers,omitempty diagram,omitempty schedule,omitempty lists_omitted,omitempty note,omitempty"},
		{Transfer{}, "from to ranges source_local target_local bytes"},
		{MeshObject{}, "name,omitempty axes device_ids,omitempty"},
		{Candidate{}, "name steps time_us bytes_per_device chosen"},
		{MeshAxis{}, "name size"},
		{PairRun{}, "from to from_step to_step count"},
		{TransferRun{}, "first step count"},
		{StepJSON{}, "op dims,omitempty dim,omitempty split_dim,omitempty concat_dim,omitempty mesh_axes pairs,omitempty transfers,omitempty pair_runs,omitempty transfer_runs,omitempty before after local_shape_before local_shape_after group_size group_count bytes_per_device link,omitempty time_us latency_us bandwidth_us"},
	} {
		typ := reflect.TypeOf(tc.v)
		var tags []string
		for i := range typ.NumField() {
			tags = append(tags, typ.Field(i).Tag.Get("json"))
		}
		require.Equal(t, tc.tags, strings.Join(tags, " "), typ.Name())
	}
}

// Random values.

func randomString(rng *rand.Rand) string {
	pieces := []string{"a", "x", "model", "<", ">", "&", `"`, `\`, "\n", "\t", "\b", "\f", "\r", "\x00", "\x01", "\x1f", "\x7f",
		"é", "世", "🙂", "\u2028", "\u2029", "\ufffd", "\xff", "\xe4\xb8", "\xc3", "\xed\xa0\x80", "/", " ", "sharding<@mesh, [{\"x\"}]>"}
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func randomStrings(rng *rand.Rand) []string {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+rng.IntN(3))
	for i := range out {
		out[i] = randomString(rng)
	}
	return out
}

func randomFloat(rng *rand.Rand) float64 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return float64(rng.IntN(1000))
	}
	return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(60)-30))
}

func randomInt(rng *rand.Rand) *int {
	if rng.IntN(2) == 0 {
		return nil
	}
	n := rng.IntN(2000) - 1000
	return &n
}

func randomInts[T int | int64](rng *rand.Rand) []T {
	if rng.IntN(4) == 0 {
		return nil
	}
	out := make([]T, rng.IntN(4))
	for i := range out {
		out[i] = T(rng.Int64N(1<<40) - 1<<39)
	}
	return out
}

func randomSharding(rng *rand.Rand) ShardingJSON {
	s := ShardingJSON{Replicated: randomStrings(rng), Unreduced: randomStrings(rng), Text: randomString(rng), Hlo: randomString(rng), PartitionSpec: randomString(rng)}
	if rng.IntN(5) > 0 {
		s.Dims = make([]DimShardingJSON, rng.IntN(4))
		for i := range s.Dims {
			s.Dims[i] = DimShardingJSON{Axes: randomStrings(rng), Open: rng.IntN(2) == 0, Priority: randomInt(rng)}
		}
	}
	return s
}

func randomSteps(rng *rand.Rand) []StepJSON {
	if rng.IntN(4) == 0 {
		return nil
	}
	out := make([]StepJSON, rng.IntN(3))
	for i := range out {
		s := StepJSON{Op: randomString(rng), Dims: randomInts[int](rng), Dim: randomInt(rng), SplitDim: randomInt(rng), ConcatDim: randomInt(rng),
			MeshAxes: randomStrings(rng), Before: randomSharding(rng), After: randomSharding(rng),
			LocalShapeBefore: randomInts[int64](rng), LocalShapeAfter: randomInts[int64](rng), GroupSize: rng.IntN(9), GroupCount: rng.IntN(9),
			BytesPerDevice: rng.Int64(), Link: randomString(rng), TimeUS: randomFloat(rng), LatencyUS: randomFloat(rng), BandwidthUS: randomFloat(rng)}
		if rng.IntN(3) == 0 {
			s.Pairs = [][2]int{{0, 1}, {rng.IntN(9), rng.IntN(9)}}
			s.Transfers = randomTransfers(rng)
			s.PairRuns = []PairRun{{From: 1, Count: 2}, {From: rng.IntN(9), To: rng.IntN(9), FromStep: rng.IntN(9) - 4, ToStep: rng.IntN(9), Count: rng.IntN(99)}}
			s.TransferRuns = []TransferRun{{Count: 4}}
			if ts := randomTransfers(rng); len(ts) > 1 {
				s.TransferRuns = append(s.TransferRuns, TransferRun{First: ts[0], Step: ts[1], Count: rng.IntN(99)})
			}
		}
		out[i] = s
	}
	return out
}

// randomRange is nil, empty, or a few [lo, hi) pairs.
func randomRange(rng *rand.Rand) planner.Range {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return planner.Range{}
	}
	out := make(planner.Range, 1+rng.IntN(3))
	lim := []int64{10, 1000, 1 << 14, 1 << 40}[rng.IntN(4)] // appendInt's cases
	for i := range out {
		out[i] = [2]int64{rng.Int64N(lim), rng.Int64N(2*lim) - lim}
	}
	return out
}

// shareShardings makes some of r's shardings the same rendering as others, as
// shardingWriter does (each step's before its previous step's after), or the same but for
// one member (a rendering the encoder must not copy from the other).
func shareShardings(rng *rand.Rand, r *ReshardResponse) {
	all := []*ShardingJSON{&r.Source, &r.Target}
	for i := range r.Steps {
		all = append(all, &r.Steps[i].Before, &r.Steps[i].After)
	}
	for i := 1; i < len(all); i++ {
		if rng.IntN(2) == 0 {
			continue
		}
		*all[i] = *all[rng.IntN(i)]
		switch rng.IntN(6) {
		case 0:
			all[i].Text += "x"
		case 1:
			all[i].Hlo = randomString(rng)
		case 2:
			all[i].PartitionSpec = randomString(rng)
		case 3:
			all[i].Dims = slices.Clone(all[i].Dims)
			if len(all[i].Dims) > 0 {
				all[i].Dims[0].Open = !all[i].Dims[0].Open
			}
		case 4:
			if all[i].Dims == nil {
				all[i].Dims = []DimShardingJSON{}
			} else if len(all[i].Dims) == 0 {
				all[i].Dims = nil
			}
		}
	}
}

// randomMesh gives a mesh object with a name or none, no axes (nil or empty) or a few,
// and device ids nil, empty or a few.
func randomMesh(rng *rand.Rand) MeshObject {
	m := MeshObject{Name: randomString(rng), DeviceIDs: randomInts[int](rng)}
	switch rng.IntN(4) {
	case 0:
	case 1:
		m.Axes = []MeshAxis{}
	default:
		for range 1 + rng.IntN(3) {
			m.Axes = append(m.Axes, MeshAxis{Name: randomString(rng), Size: rng.IntN(1<<20) - 2})
		}
	}
	return m
}

func randomTransfers(rng *rand.Rand) []Transfer {
	if rng.IntN(5) == 0 {
		return nil
	}
	out := make([]Transfer, rng.IntN(4))
	for i := range out {
		out[i] = Transfer{From: rng.IntN(1 << 16), To: rng.IntN(1<<16) - 1, Ranges: randomRange(rng),
			SourceLocal: randomRange(rng), TargetLocal: randomRange(rng), Bytes: rng.Int64() - 1<<62}
	}
	return out
}

func randomGraph(rng *rand.Rand) *GraphResponse {
	g := &GraphResponse{PlanID: randomString(rng), Mesh: randomMesh(rng),
		Refined: randomStrings(rng), Note: randomString(rng), ListsOmitted: rng.IntN(2) == 0,
		Summary: GraphSummary{Strategy: randomString(rng), TimeUS: randomFloat(rng)}}
	if rng.IntN(6) > 0 {
		g.Shardings = map[string]ShardingJSON{}
		for range rng.IntN(6) {
			g.Shardings[randomString(rng)] = randomSharding(rng)
		}
	}
	if rng.IntN(6) > 0 {
		g.Explain = map[string][]ExplainEntry{}
		for range rng.IntN(6) {
			var es []ExplainEntry
			if rng.IntN(4) > 0 {
				es = make([]ExplainEntry, rng.IntN(3))
				for i := range es {
					es[i] = ExplainEntry{Dim: rng.IntN(4), Axes: randomStrings(rng), From: randomString(rng)}
				}
			}
			g.Explain[randomString(rng)] = es
		}
	}
	if rng.IntN(6) > 0 {
		g.Collectives = make([]GraphCollective, rng.IntN(4))
		for i := range g.Collectives {
			c := GraphCollective{OpName: randomString(rng), Tensor: randomString(rng), Kind: randomString(rng), Reduction: randomString(rng),
				MeshAxes: randomStrings(rng), Dim: randomInt(rng), Shape: randomInts[int64](rng), Steps: randomSteps(rng),
				TimeUS: randomFloat(rng), BytesPerDevice: rng.Int64N(1 << 40), FullRematerialization: rng.IntN(2) == 0, XLAFallback: rng.IntN(2) == 0}
			if rng.IntN(2) == 0 {
				c.Plan = &GraphPlan{Source: randomSharding(rng), Target: randomSharding(rng), Steps: randomSteps(rng),
					Summary:        SummaryJSON{Strategy: randomString(rng), CostModel: randomString(rng), TimeUS: randomFloat(rng), Efficiency: randomFloat(rng), TimeLowerBoundUS: randomFloat(rng), TimeEfficiency: randomFloat(rng), XLAFallback: rng.IntN(2) == 0},
					SuggestionNote: randomString(rng), XLAWarning: randomString(rng), XLAPath: randomStrings(rng)}
				if rng.IntN(2) == 0 {
					c.Plan.Summary.Candidates = []Candidate{{Name: randomString(rng), TimeUS: randomFloat(rng)}}
				}
				for range rng.IntN(3) {
					c.Plan.SuggestedConstraints = append(c.Plan.SuggestedConstraints, Suggestion{PartitionSpec: randomString(rng), Sharding: randomSharding(rng)})
				}
			}
			g.Collectives[i] = c
		}
	}
	if rng.IntN(3) == 0 {
		g.Ops = []OpShardingJSON{{Name: randomString(rng), Kind: randomString(rng), Results: []ShardingJSON{randomSharding(rng)}}}
		g.OpaqueOps = []OpaqueOpJSON{{Op: randomString(rng), Results: randomStrings(rng), Line: 3}}
	}
	return g
}

// requireReshardSameAsEncodingJSON checks that the reshard encoder writes r byte for
// byte as encoding/json does.
func requireReshardSameAsEncodingJSON(t *testing.T, r *ReshardResponse) {
	t.Helper()
	want, err := encodeJSON(r)
	require.NoError(t, err)
	got, err := encodeReshardJSON(r)
	require.NoError(t, err)
	if string(got) != string(want) {
		i := 0
		for i < len(want) && i < len(got) && want[i] == got[i] {
			i++
		}
		lo := max(i-80, 0)
		t.Fatalf("differs at byte %d of %d:\n got  %.200q\n want %.200q", i, len(want), got[lo:min(i+80, len(got))], want[lo:min(i+80, len(want))])
	}
}

// TestReshardJSONMatchesEncodingJSON: the hand-written reshard encoder equals
// encoding/json on random answers (every member, the per-device lists with nil and empty
// ranges, strings that need escaping, floats across the exponent cutoffs) and on the
// planned answers of real requests (permute pairs, all_to_all_v transfers, runs above
// the list limit, tiles, strategy xla's members); a NaN falls back to encoding/json.
func TestReshardJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 7))
	for i := range 300 {
		r := &ReshardResponse{PlanID: randomString(rng), Mesh: randomMesh(rng),
			Shape: randomInts[int64](rng), Source: randomSharding(rng), Target: randomSharding(rng), Steps: randomSteps(rng),
			Summary:        SummaryJSON{Strategy: randomString(rng), CostModel: randomString(rng), TimeUS: randomFloat(rng), Efficiency: randomFloat(rng), TimeLowerBoundUS: randomFloat(rng), TimeEfficiency: randomFloat(rng), XLAFallback: rng.IntN(2) == 0},
			SuggestionNote: randomString(rng), XLAWarning: randomString(rng), XLAPath: randomStrings(rng), SourceHlo: randomString(rng), TargetHlo: randomString(rng),
			Transfers: randomTransfers(rng), Diagram: randomString(rng), ListsOmitted: rng.IntN(2) == 0, Note: randomString(rng)}
		if rng.IntN(4) > 0 {
			r.SuggestedConstraints = []Suggestion{}
			for range rng.IntN(3) {
				r.SuggestedConstraints = append(r.SuggestedConstraints, Suggestion{PartitionSpec: randomString(rng), Sharding: randomSharding(rng)})
			}
		}
		if rng.IntN(3) == 0 {
			r.Summary.Candidates = []Candidate{{Name: randomString(rng), TimeUS: randomFloat(rng)},
				{Name: randomString(rng), Steps: rng.IntN(9), TimeUS: randomFloat(rng), BytesPerDevice: rng.Int64N(1 << 40), Chosen: rng.IntN(2) == 0}}
		}
		shareShardings(rng, r)
		t.Run(fmt.Sprint("random/", i), func(t *testing.T) { requireReshardSameAsEncodingJSON(t, r) })
	}
	s := newTestServer(t, nil)
	for _, body := range []string{
		`{"mesh":"x=4,y=4","shape":[64,64],"dtype":"bf16","source":[["x"],["y"]],"target":[["y"],["x"]]}`,
		`{"mesh":"x=4,y=4","shape":[64,96],"dtype":"bf16","source":[["x"],null],"target":[null,["x","y"]],"allowed_ops":["all_to_all_v"]}`,
		`{"mesh":"x=4,y=4","shape":[64,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],null],"include":["tiles","transfers","diagram"]}`,
		`{"mesh":"x=32,y=64","shape":[4096,4096],"dtype":"bf16","source":[["x"],["y"]],"target":[["y"],["x"]]}`,
		`{"mesh":"x=2,y=2","shape":[6,6],"dtype":"bf16","source":[["x"],null],"target":[["x","y"],null],"strategy":"xla"}`,
		`{"mesh":"x=4,y=2","shape":[64,64],"dtype":"bf16","source":[["x"],null],"target":[null,["x"]],"strategy":"xla"}`,
	} {
		in := &reshardInput{include: map[string]bool{}}
		require.NoError(t, decodeBytes([]byte(body), &in.req), body)
		require.NoError(t, s.prepareReshard(in), body)
		resp, err := s.planReshard(context.Background(), in)
		require.NoError(t, err, body)
		requireReshardSameAsEncodingJSON(t, resp)
	}
	// A NaN anywhere makes the answer encoding/json's (and its error).
	_, err := encodeReshardJSON(&ReshardResponse{Summary: SummaryJSON{TimeUS: math.NaN()}})
	var uv *json.UnsupportedValueError
	require.ErrorAs(t, err, &uv)
}

// TestAnswerBuffers: an answer is encoded into a pooled scratch buffer and copied out
// at its size, so the plan memo holds no slack; the scratch is never shared with an
// answer (encoding another answer after it leaves its bytes as they were); and the size
// hint bounds every answer, so the scratch never grows while encoding.
func TestAnswerBuffers(t *testing.T) {
	s := newTestServer(t, nil)
	var answers [][]byte
	var copies [][]byte
	for _, body := range []string{
		`{"mesh":"x=4,y=4","shape":[64,96],"dtype":"bf16","source":[["x"],null],"target":[null,["x","y"]],"allowed_ops":["all_to_all_v"]}`,
		`{"mesh":"x=32,y=8","shape":[4096,96],"dtype":"bf16","source":[["x"],null],"target":[null,["x","y"]],"allowed_ops":["all_to_all_v"]}`,
		`{"mesh":"x=4,y=2","shape":[6,10],"dtype":"f32","source":[["x"],null],"target":[null,["x","y"]],"include":["tiles"]}`,
		`{"mesh":"x=32,y=8","shape":[1000,999],"dtype":"f64","source":[["y"],["x"]],"target":[["x"],null],"allowed_ops":["all_to_all_v"]}`,
	} {
		in := &reshardInput{include: map[string]bool{}}
		require.NoError(t, decodeBytes([]byte(body), &in.req))
		require.NoError(t, s.prepareReshard(in))
		resp, err := s.planReshard(t.Context(), in)
		require.NoError(t, err)
		b, err := encodeReshardJSON(resp)
		require.NoError(t, err)
		assert.Equal(t, len(b), cap(b), "an answer has no slack: %s", body)
		assert.LessOrEqual(t, len(b), reshardJSONSizeHint(resp), "the hint bounds the answer: %s", body)
		answers = append(answers, b)
		copies = append(copies, bytes.Clone(b))
	}
	for i := range answers {
		require.Equal(t, copies[i], answers[i], "answer %d was written over by a later encoding", i)
	}
}
