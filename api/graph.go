package api

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/propagation"
)

// GraphResponse is a propagated graph and its collective schedule.
type GraphResponse struct {
	PlanID string     `json:"plan_id"`
	Mesh   MeshObject `json:"mesh"`
	// Shardings is the final (closed) sharding of every tensor.
	Shardings map[string]ShardingJSON `json:"shardings"`
	// Collectives lists, in op order, every layout change and reduction the graph needs.
	Collectives []GraphCollective `json:"collectives"`
	Summary     GraphSummary      `json:"summary"`
	// Explain gives, per tensor, where the axes of each dim came from.
	Explain map[string][]ExplainEntry `json:"explain"`
	// Refined lists the annotated tensors whose open dims gained axes.
	Refined []string `json:"refined"`
	// Ops is the sharding each op computes in (include "ops").
	Ops   []OpShardingJSON `json:"ops,omitempty"`
	Stats GraphStats       `json:"stats"`
	// ListsOmitted: per-device lists were left out (see Note).
	ListsOmitted bool   `json:"lists_omitted,omitempty"`
	Note         string `json:"note,omitempty"`
	// OpaqueOps (module requests) lists the ops the import does not model: barriers
	// nothing propagates through.
	OpaqueOps []OpaqueOpJSON `json:"opaque_ops,omitempty"`
} // @name GraphResponse

// tensorAnswers holds what a GraphResponse's Shardings and Explain maps hold, in key
// (byte) order: the handler's encoder writes them from here, without filling, sorting
// and looking up two maps of one entry per tensor (planGraph fills the maps from it).
type tensorAnswers struct {
	shardingIDs []string
	shardings   []ShardingJSON
	explainIDs  []string
	explain     [][]propagation.Origin // rendered as explainEntries renders them
}

// Collective kinds of a graph.
const (
	kindReshard   = string(graphplan.KindReshard)
	kindReduction = string(graphplan.KindReduction)
)

// GraphSummary totals a graph's collectives.
type GraphSummary struct {
	Strategy  string `json:"strategy" example:"optimal"`
	CostModel string `json:"cost_model" example:"tpu-v5p"`
	// TimeUS sums every collective's time (a serial upper bound; no overlap assumed).
	TimeUS float64 `json:"time_us"`
	// Collectives counts the communicating steps over the whole graph.
	Collectives    int   `json:"collectives"`
	Reshards       int   `json:"reshards"`
	Reductions     int   `json:"reductions"`
	BytesPerDevice int64 `json:"bytes_per_device"`
	// FullRematerialization is true when some reshard fully replicates a tensor that
	// neither its source nor its target replicates.
	FullRematerialization bool `json:"full_rematerialization"`
	// XLAFallback (strategy xla): some reshard takes XLA's last-resort path.
	XLAFallback bool `json:"xla_fallback,omitempty"`
	// UniquePlans is how many distinct reshard problems were planned (equal ones share).
	UniquePlans int `json:"unique_plans"`
} // @name GraphSummary

// ExplainEntry says where some axes of a tensor dim came from.
type ExplainEntry struct {
	Dim  int      `json:"dim"`
	Axes []string `json:"axes"`
	From string   `json:"from" example:"x dim 0 through mm (factor i)"`
} // @name ExplainEntry

// OpShardingJSON is the sharding an op computes in.
type OpShardingJSON struct {
	Name    string           `json:"name"`
	Kind    string           `json:"kind"`
	Rule    string           `json:"rule,omitempty"`
	Factors []FactorAxesJSON `json:"factors,omitempty"`
	// Operands and Results are the shardings the op computes in, by operand and result.
	Operands []ShardingJSON `json:"operands,omitempty"`
	Results  []ShardingJSON `json:"results,omitempty"`
	// OperandTensors and ResultTensors name the tensors in the same order (keys of
	// shardings): an operand's own sharding is shardings[operand_tensors[i]], and a
	// reshard runs where it differs from operands[i].
	OperandTensors []string `json:"operand_tensors,omitempty"`
	ResultTensors  []string `json:"result_tensors,omitempty"`
} // @name OpSharding

// FactorAxesJSON is one factor of an op's rule and the axes it is computed on.
type FactorAxesJSON struct {
	Factor string   `json:"factor" example:"i"`
	Size   int64    `json:"size"`
	Type   string   `json:"type" enums:"pass_through,reduction,need_replication,permutation"`
	Axes   []string `json:"axes"`
} // @name FactorAxes

// graph godoc
//
//	@Summary		Propagate shardings through an op graph or a StableHLO module and plan its collectives
//	@Description	Runs Shardy's factor-based propagation over the graph (annotations, op and user priorities, basic or aggressive conflict resolution), then plans every reshard an op needs with the reshard planner (or XLA's emulation with `strategy: xla`) and every reduction of a sharded contracting factor (all_reduce or reduce_scatter). `explain` says where each dim's axes came from; `refined` lists annotated tensors whose open dims gained axes. `policy.forbid_full_rematerialization` turns a graph with a rematerializing reshard into a 422 naming each one. Instead of `tensors`/`ops`, `module` takes a StableHLO module in MLIR text (jax's `as_text()`, Shardy's printed form or the generic form; `sdy.mesh`, `sdy.sharding`, `sdy.sharding_per_value`, `sdy.sharding_constraint`, `sdy.sharding_rule`, `mhlo.sharding`); the raw text may be posted with `Content-Type: application/mlir` and the other fields as query parameters. Tensor ids are then the SSA names (`arg0`, `3`, `1#1`) and `result0`, ...; ops the import does not model are barriers listed in `opaque_ops`. With `Accept: application/mlir` the answer is the module annotated as sdy_opt prints a propagated one.
//	@Tags			graph
//	@Accept			json
//	@Accept			application/mlir
//	@Produce		json
//	@Produce		application/mlir
//	@Produce		application/problem+json
//	@Param			request				body		GraphRequest	true	"mesh, tensors, ops; or module (an application/mlir body is the module's text)"
//	@Param			function			query		string			false	"application/mlir body: the function to plan (default main)"
//	@Param			mesh				query		string			false	"application/mlir body: the mesh, as x=2,y=4 or as a framework prints it (Mesh(...), sdy.mesh, DeviceMesh(...)), when the module declares no sdy.mesh"
//	@Param			strategy			query		string			false	"application/mlir body: optimal or xla"	Enums(optimal, xla)
//	@Param			cost_model			query		string			false	"application/mlir body: a cost model profile name"
//	@Param			conflict_resolution	query		string			false	"application/mlir body: options.conflict_resolution"	Enums(aggressive, basic, basic_then_aggressive)
//	@Param			op_priority			query		bool			false	"application/mlir body: options.op_priority"
//	@Param			include				query		string			false	"application/mlir body: comma-separated include list (ops, pairs)"
//	@Success		200					{object}	GraphResponse
//	@Header			200					{string}	X-Cache	"hit or miss"
//	@Failure		400					{object}	Problem	"invalid JSON, mesh, tensor, op, attribute, sharding or cost model (the field is named); unknown op (the supported ops are listed); cycle outside while; invalid-module: a module error naming its line and column"
//	@Failure		406					{object}	Problem	"application/mlir asked for an op-list request"
//	@Failure		408					{object}	Problem	"the body did not arrive within SHARDPLAN_BODY_READ_TIMEOUT"
//	@Failure		413					{object}	Problem	"body too large"
//	@Failure		415					{object}	Problem	"neither JSON nor application/mlir"
//	@Failure		401					{object}	Problem	"no or a wrong API key (when SHARDPLAN_API_KEYS is set)"
//	@Failure		429					{object}	Problem	"over the per-client rate limit (SHARDPLAN_RATE_LIMIT; Retry-After)"
//	@Failure		422					{object}	Problem	"policy violation: a reshard rematerializes (the graph's answer is under `plan`); or response-too-large: the step lists exceed SHARDPLAN_MAX_RESPONSE_BYTES"
//	@Failure		503					{object}	Problem	"overloaded or timed out"
//	@Router			/v1/graph [post]
func (s *Server) graph(ctx context.Context, r *http.Request, body []byte) (*answer, error) {
	mod, err := moduleRequest(r, body)
	if err != nil {
		return nil, err
	}
	in, err := s.prepareGraph(ctx, body, mod)
	if err != nil {
		return nil, err
	}
	if wantsMLIR(r) {
		return s.graphMLIR(ctx, in)
	}
	if in.key, err = graphKey(in); err != nil {
		return nil, err
	}
	return s.answerPlanned(ctx, in.key, in.req.Policy, false, func(ctx context.Context) ([]byte, *verdict, error) {
		resp, ta, err := s.planGraphTensors(ctx, in)
		if err != nil {
			return nil, nil, in.locate(err)
		}
		v, err := resp.verdict()
		if err != nil {
			return nil, nil, err
		}
		body, err := encodeGraphTensors(resp, ta)
		return body, v, err
	}, readGraphVerdict)
}

// fill sets resp's Shardings and Explain maps from ta and returns resp.
func (ta *tensorAnswers) fill(resp *GraphResponse) *GraphResponse {
	resp.Shardings = make(map[string]ShardingJSON, len(ta.shardings))
	for i, id := range ta.shardingIDs {
		resp.Shardings[id] = ta.shardings[i]
	}
	resp.Explain = make(map[string][]ExplainEntry, len(ta.explain))
	for i, id := range ta.explainIDs {
		resp.Explain[id] = explainEntries(ta.explain[i])
	}
	return resp
}

// planGraphTensors plans the graph (graphplan: propagation, every reshard and reduction)
// and renders the response, leaving its Shardings and Explain nil: they are in ta, for
// encodeGraphTensors.
func (s *Server) planGraphTensors(ctx context.Context, in *graphInput) (resp *GraphResponse, ta *tensorAnswers, err error) {
	start := time.Now()
	effort, budget := in.planning()
	gp, err := graphplan.Plan(ctx, &graphplan.Request{Graph: in.graph, Mesh: in.mesh, Options: in.opts, Strategy: in.strategy, Model: in.model, AllowFullRemat: in.remat, Effort: effort, PlanningBudget: budget, Memos: s.planMemos, Cores: s.lendCores})
	s.metrics.observePlan("graph", in.strategy, start)
	if err != nil {
		return nil, nil, err
	}
	res := gp.Propagation
	m := in.mesh
	sum := gp.Summary
	resp = &GraphResponse{
		Mesh:        meshJSON(m),
		Collectives: make([]GraphCollective, 0, len(gp.Collectives)),
		Refined:     res.Refined, Stats: graphStatsOf(res.Stats),
		Summary: GraphSummary{
			Strategy: string(in.strategy), CostModel: in.model.Name(), UniquePlans: sum.UniquePlans,
			TimeUS: sum.TimeUS, Collectives: sum.Collectives, BytesPerDevice: sum.BytesPerDevice,
			Reshards: sum.Reshards, Reductions: sum.Reductions,
			FullRematerialization: sum.FullRematerialization, XLAFallback: sum.XLAFallback,
		},
	}
	if resp.Refined == nil {
		resp.Refined = []string{}
	}
	sw := &shardingWriter{m: m}
	ta = renderTensors(res, in.tensorIDs(), sw)
	cr := collectiveRenderer{sw: sw, model: in.model, lists: s.stepLists(m, in.include), budget: s.newBudget()}
	for i := range gp.Collectives {
		c, omitted, err := cr.render(ctx, &gp.Collectives[i])
		if err != nil {
			return nil, nil, err
		}
		resp.ListsOmitted = resp.ListsOmitted || omitted
		resp.Collectives = append(resp.Collectives, c)
	}
	if in.include["ops"] {
		resp.Ops = opShardingsJSON(res.Ops, sw)
		nameOpTensors(resp.Ops, in.graph)
	}
	if resp.ListsOmitted {
		resp.Note = s.listsOmittedNote(m)
	}
	if in.imp != nil {
		resp.OpaqueOps = opaqueOpsJSON(in.imp.Opaque)
	}
	resp.PlanID = in.key
	return resp, ta, nil
}

// renderTensors renders the result's shardings (closed) and explanations in tensor id
// order. ids, the graph's sorted tensor ids, are the result's tensors (should they not
// be, the result's ids are sorted here); explained tensors are among them.
func renderTensors(res *propagation.Result, ids []string, sw *shardingWriter) *tensorAnswers {
	if !isKeySet(ids, res.Shardings) {
		ids = slices.Sorted(maps.Keys(res.Shardings))
	}
	ta := &tensorAnswers{shardingIDs: ids, shardings: make([]ShardingJSON, len(ids)),
		explainIDs: make([]string, 0, len(res.Explain)), explain: make([][]propagation.Origin, 0, len(res.Explain))}
	for i, id := range ids {
		ta.shardings[i] = sw.closedJSON(res.Shardings[id])
		if origins, ok := res.Explain[id]; ok {
			ta.explainIDs = append(ta.explainIDs, id)
			ta.explain = append(ta.explain, origins)
		}
	}
	if len(ta.explainIDs) != len(res.Explain) { // an explained tensor without a sharding
		ta.explainIDs = slices.Sorted(maps.Keys(res.Explain))
		ta.explain = ta.explain[:0]
		for _, id := range ta.explainIDs {
			ta.explain = append(ta.explain, res.Explain[id])
		}
	}
	return ta
}

// isKeySet reports whether the distinct ids are exactly m's keys.
func isKeySet[V any](ids []string, m map[string]V) bool {
	if len(ids) != len(m) {
		return false
	}
	for _, id := range ids {
		if _, ok := m[id]; !ok {
			return false
		}
	}
	return true
}

func explainEntries(origins []propagation.Origin) []ExplainEntry {
	es := make([]ExplainEntry, len(origins))
	for i, o := range origins {
		es[i] = ExplainEntry{Dim: o.Dim, Axes: refStrings(o.Axes), From: o.From}
	}
	return es
}

func opShardingsJSON(ops []propagation.OpSharding, sw *shardingWriter) []OpShardingJSON {
	out := make([]OpShardingJSON, len(ops))
	for i, o := range ops {
		oj := OpShardingJSON{Name: o.Op, Kind: o.Kind, Rule: o.Rule}
		for _, f := range o.Factors {
			oj.Factors = append(oj.Factors, FactorAxesJSON{Factor: f.Factor, Size: f.Size, Type: f.Type.String(), Axes: refStrings(f.Axes)})
		}
		for _, sh := range o.Operands {
			oj.Operands = append(oj.Operands, sw.json(sh))
		}
		for _, sh := range o.Results {
			oj.Results = append(oj.Results, sw.json(sh))
		}
		out[i] = oj
	}
	return out
}

// nameOpTensors sets each op's operand and result tensor names from the graph (ops of
// while regions included), matching ops by name.
func nameOpTensors(ops []OpShardingJSON, g *propagation.Graph) {
	byName := map[string]*propagation.Op{}
	var walk func(ops []propagation.Op)
	walk = func(ops []propagation.Op) {
		for i := range ops {
			byName[ops[i].Name] = &ops[i]
			for _, r := range []*propagation.Region{ops[i].Cond, ops[i].Body} {
				if r != nil {
					walk(r.Ops)
				}
			}
		}
	}
	walk(g.Ops)
	for i := range ops {
		if op, ok := byName[ops[i].Name]; ok {
			ops[i].OperandTensors, ops[i].ResultTensors = op.Operands, op.Results
		}
	}
}

// graphView is what a graph answer's verdict reads of it.
type graphView struct {
	Summary     remat            `json:"summary"`
	Collectives []collectiveView `json:"collectives"`
}

type collectiveView struct {
	OpName string `json:"op_name"`
	Tensor string `json:"tensor"`
	remat
	Plan *reshardView `json:"plan"`
}

// readGraphVerdict reads the verdict of a memoized graph answer.
func readGraphVerdict(body []byte) (*verdict, error) {
	var v graphView
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	return v.verdict(), nil
}

// verdict gives g's verdict from the rendered answer (the collectives that break the
// policy; the others say nothing).
func (g *GraphResponse) verdict() (*verdict, error) {
	v := graphView{Summary: remat{FullRematerialization: g.Summary.FullRematerialization, XLAFallback: g.Summary.XLAFallback}}
	for _, c := range g.Collectives {
		cv := collectiveView{OpName: c.OpName, Tensor: c.Tensor, remat: remat{FullRematerialization: c.FullRematerialization, XLAFallback: c.XLAFallback}}
		if !v.Summary.any() || !cv.any() {
			continue
		}
		if p := c.Plan; p != nil {
			cv.Plan = &reshardView{XLAWarning: p.XLAWarning, SuggestionNote: p.SuggestionNote}
			if len(p.SuggestedConstraints) > 0 {
				sc, err := rawJSON(p.SuggestedConstraints)
				if err != nil {
					return nil, err
				}
				cv.Plan.SuggestedConstraints = sc
			}
		}
		v.Collectives = append(v.Collectives, cv)
	}
	return v.verdict(), nil
}

// verdict: a graph with a rematerializing reshard breaks forbid_full_rematerialization;
// the problem names each one with its suggested constraints.
func (g *graphView) verdict() *verdict {
	if !g.Summary.any() {
		return &verdict{}
	}
	var vs []Violation
	var names []string
	for _, c := range g.Collectives {
		if !c.any() {
			continue
		}
		msg := fmt.Sprintf("reshard of tensor %q at op %q goes through an involuntary full rematerialization", c.Tensor, c.OpName)
		if !c.FullRematerialization {
			msg = fmt.Sprintf("reshard of tensor %q at op %q takes XLA's last resort within device groups", c.Tensor, c.OpName)
		}
		v := Violation{Policy: "forbid_full_rematerialization", OpName: c.OpName, Tensor: c.Tensor}
		if c.Plan != nil {
			if c.Plan.XLAWarning != "" {
				msg += ": " + c.Plan.XLAWarning
			}
			v.SuggestedConstraints = c.Plan.SuggestedConstraints
			v.SuggestionNote = c.Plan.SuggestionNote
		}
		v.Message = msg
		vs = append(vs, v)
		names = append(names, c.OpName+"/"+c.Tensor)
	}
	return &verdict{
		Violated:   true,
		Detail:     fmt.Sprintf("%d reshard(s) go through an involuntary full rematerialization: %s", len(vs), strings.Join(names, ", ")),
		Violations: vs,
	}
}

// graphMLIR answers a module request with the module annotated as sdy_opt prints a
// propagated one (propagation only: the collectives are in the JSON answer).
func (s *Server) graphMLIR(ctx context.Context, in *graphInput) (*answer, error) {
	if in.imp == nil {
		return nil, NewProblem(http.StatusNotAcceptable, slugNotAcceptable, "Not acceptable",
			"an application/mlir answer needs a module request (\"module\" or an application/mlir body); ask a JSON op list for application/json")
	}
	res, err := propagation.Propagate(ctx, in.graph, in.mesh, in.opts)
	if err != nil {
		return nil, in.locate(err)
	}
	return &answer{body: []byte(in.imp.Annotate(res.Shardings))}, nil
}

// The graph answer's encoder: encodeGraphTensors writes the bytes encodeJSON writes
// (encoding/json with HTML escaping off, no trailing newline): by hand (jsonAppender)
// for what grows with the graph (a sharding and an explanation per tensor, the
// collectives and their steps), through encoding/json for the small or rare members (the
// graph's summary, stats, ops and opaque ops). graphjson_test.go checks the bytes
// against encodeJSON on the examples, transformer graphs and random strings, and that
// the hand-written types still have the fields the encoder knows.

// graphItemBytes is the size per item (answerItems) of the last graph answer encoded:
// the next answer's buffer is sized from it and its own number of items, so that a
// large answer is not copied at every growth of its buffer, and a small answer after a
// large one does not take the large one's buffer.
var graphItemBytes atomic.Int64

// defaultItemBytes is graphItemBytes before the first answer: about what a transformer
// layer's tensors, explanations and collectives take.
const defaultItemBytes = 256

// answerItems counts what a graph answer's size grows with: its tensors' shardings and
// explanations, its collectives and (include ops) its ops.
func answerItems(r *GraphResponse, ta *tensorAnswers) int64 {
	n := len(r.Collectives) + len(r.Ops) + len(r.Shardings) + len(r.Explain)
	if ta != nil {
		n += len(ta.shardings) + len(ta.explain)
	}
	return int64(max(n, 1))
}

// encodeGraphTensors encodes r exactly as encodeJSON does, with its Shardings and
// Explain maps as ta holds them (r's are then nil, planGraphTensors); ta nil: r's.
func encodeGraphTensors(r *GraphResponse, ta *tensorAnswers) ([]byte, error) {
	items := answerItems(r, ta)
	per := graphItemBytes.Load()
	if per == 0 {
		per = defaultItemBytes
	}
	size := max(per*items, 4<<10)
	e := jsonAppender{b: make([]byte, 0, size+size/8), tensors: ta}
	e.graph(r)
	if e.err != nil && ta != nil {
		return encodeJSON(ta.fill(r))
	}
	if e.err != nil {
		return encodeJSON(r)
	}
	graphItemBytes.Store(int64(len(e.b))/items + 1)
	return e.b, nil
}

// graph writes GraphResponse (members in field order, omitempty as tagged).
func (e *jsonAppender) graph(r *GraphResponse) {
	e.b = append(e.b, '{')
	e.key("plan_id", true)
	e.str(r.PlanID)
	e.key("mesh", false)
	e.mesh(&r.Mesh)
	e.key("shardings", false)
	if ta := e.tensors; ta != nil {
		orderedMap(e, ta.shardingIDs, ta.shardings, e.sharding)
	} else {
		sortedMap(e, r.Shardings, func(s ShardingJSON) { e.sharding(&s) })
	}
	e.key("collectives", false)
	list(e, r.Collectives, e.collective)
	e.key("summary", false)
	e.ref(r.Summary)
	e.key("explain", false)
	if ta := e.tensors; ta != nil {
		orderedMap(e, ta.explainIDs, ta.explain, func(os *[]propagation.Origin) { e.origins(*os) })
	} else {
		sortedMap(e, r.Explain, e.explanation)
	}
	e.key("refined", false)
	e.strs(r.Refined)
	if len(r.Ops) > 0 {
		e.key("ops", false)
		e.ref(r.Ops)
	}
	e.key("stats", false)
	e.ref(r.Stats)
	if r.ListsOmitted {
		e.key("lists_omitted", false)
		e.bool(true)
	}
	if r.Note != "" {
		e.key("note", false)
		e.str(r.Note)
	}
	if len(r.OpaqueOps) > 0 {
		e.key("opaque_ops", false)
		e.ref(r.OpaqueOps)
	}
	e.b = append(e.b, '}')
}

// sortedMap appends m as an object (nil: null) with its keys in the order encoding/json
// gives string keys (byte order), each value written by val.
func sortedMap[V any](e *jsonAppender, m map[string]V, val func(V)) {
	if m == nil {
		e.b = append(e.b, "null"...)
		return
	}
	var buf [8]string // the keys of an op's attributes, without allocating
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.b = append(e.b, '{')
	for i, k := range keys {
		e.key(k, i == 0)
		val(m[k])
	}
	e.b = append(e.b, '}')
}

// orderedMap appends the object of keys (distinct, in byte order) and their values, as
// sortedMap appends the map of them.
func orderedMap[V any](e *jsonAppender, keys []string, vals []V, val func(*V)) {
	e.b = append(e.b, '{')
	for i, k := range keys {
		e.key(k, i == 0)
		val(&vals[i])
	}
	e.b = append(e.b, '}')
}

func (e *jsonAppender) explanation(es []ExplainEntry) {
	list(e, es, func(x *ExplainEntry) {
		e.intAt(`{"dim":`, int64(x.Dim))
		e.strsAt(`,"axes":`, x.Axes)
		e.strAt(`,"from":`, x.From)
		e.b = append(e.b, '}')
	})
}

// origins writes os as explanation writes explainEntries(os), without building those.
func (e *jsonAppender) origins(os []propagation.Origin) {
	e.b = append(e.b, '[')
	for i := range os {
		o := &os[i]
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.intAt(`{"dim":`, int64(o.Dim))
		e.b = append(e.b, `,"axes":[`...)
		for k, a := range o.Axes {
			if k > 0 {
				e.b = append(e.b, ',')
			}
			e.str(a.String())
		}
		e.b = append(e.b, ']')
		e.strAt(`,"from":`, o.From)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ']')
}

// collective writes GraphCollective.
func (e *jsonAppender) collective(c *GraphCollective) {
	e.strAt(`{"op_name":`, c.OpName)
	e.strAt(`,"tensor":`, c.Tensor)
	e.strAt(`,"kind":`, c.Kind)
	e.optStr(`,"reduction":`, c.Reduction)
	if len(c.MeshAxes) > 0 {
		e.strsAt(`,"mesh_axes":`, c.MeshAxes)
	}
	e.optInt(`,"dim":`, c.Dim)
	e.b = append(e.b, `,"shape":`...)
	ints(e, c.Shape)
	if c.Plan != nil {
		e.b = append(e.b, `,"plan":`...)
		e.plan(c.Plan)
	}
	if len(c.Steps) > 0 {
		e.b = append(e.b, `,"steps":`...)
		list(e, c.Steps, e.step)
	}
	e.floatAt(`,"time_us":`, c.TimeUS)
	e.intAt(`,"bytes_per_device":`, c.BytesPerDevice)
	e.boolAt(`,"full_rematerialization":`, c.FullRematerialization)
	if c.XLAFallback {
		e.b = append(e.b, `,"xla_fallback":true`...)
	}
	e.b = append(e.b, '}')
}

// plan writes GraphPlan.
func (e *jsonAppender) plan(p *GraphPlan) {
	e.b = append(e.b, `{"source":`...)
	e.sharding(&p.Source)
	e.b = append(e.b, `,"target":`...)
	e.sharding(&p.Target)
	e.b = append(e.b, `,"steps":`...)
	list(e, p.Steps, e.step)
	e.b = append(e.b, `,"summary":`...)
	e.summary(&p.Summary)
	if len(p.SuggestedConstraints) > 0 {
		e.b = append(e.b, `,"suggested_constraints":`...)
		list(e, p.SuggestedConstraints, e.suggestion)
	}
	e.xlaNotes(p.SuggestionNote, p.XLAWarning, p.XLAPath)
	e.b = append(e.b, '}')
}
