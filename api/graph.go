package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/stablehlo"
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

// GraphCollective is one reshard or reduction of a graph, named by the op and tensor
// that cause it.
type GraphCollective struct {
	OpName string `json:"op_name" example:"mm"`
	Tensor string `json:"tensor" example:"x"`
	Kind   string `json:"kind" enums:"reshard,reduction"`
	// Reduction is propagation's reading of a reduction: all_reduce, or reduce_scatter
	// when the result is then sharded on the reduced axes (Dim).
	Reduction string   `json:"reduction,omitempty" enums:"all_reduce,reduce_scatter"`
	MeshAxes  []string `json:"mesh_axes,omitempty"`
	Dim       *int     `json:"dim,omitempty"`
	Shape     []int64  `json:"shape"`
	// Plan is a reshard's full plan.
	Plan *GraphPlan `json:"plan,omitempty"`
	// Steps are a reduction's steps.
	Steps                 []StepJSON `json:"steps,omitempty"`
	TimeUS                float64    `json:"time_us"`
	BytesPerDevice        int64      `json:"bytes_per_device"`
	FullRematerialization bool       `json:"full_rematerialization"`
	// XLAFallback (strategy xla): XLA's last resort runs for this reshard.
	XLAFallback bool `json:"xla_fallback,omitempty"`
} // @name GraphCollective

// GraphPlan is the plan of one reshard in a graph.
type GraphPlan struct {
	Source               ShardingJSON `json:"source"`
	Target               ShardingJSON `json:"target"`
	Steps                []StepJSON   `json:"steps"`
	Summary              SummaryJSON  `json:"summary"`
	SuggestedConstraints []Suggestion `json:"suggested_constraints,omitempty"`
	// SuggestionNote says why suggested_constraints is empty when XLA falls back.
	SuggestionNote string   `json:"suggestion_note,omitempty"`
	XLAWarning     string   `json:"xla_warning,omitempty"`
	XLAPath        []string `json:"xla_path,omitempty"`
} // @name GraphPlan

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

// graphInput is a decoded, validated graph request.
type graphInput struct {
	req      *GraphRequest
	mesh     *sharding.Mesh
	graph    *propagation.Graph
	opts     propagation.Options
	model    cost.Model
	strategy planner.Strategy
	include  map[string]bool
	remat    bool // full_rematerialization: allow
	effort   planner.Effort
	key      string
	// imp is the imported module (module requests only).
	imp *stablehlo.Import
	// ids holds graph's tensor ids sorted, once tensorIDs has been called.
	ids []string
}

// tensorIDs is the sorted ids of in.graph's tensors, sorted once per request: the plan
// id hashes the tensors in this order and the answer lists them in it.
func (in *graphInput) tensorIDs() []string {
	if in.ids == nil {
		in.ids = slices.Sorted(maps.Keys(in.graph.Tensors))
	}
	return in.ids
}

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
func (s *Server) graph(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	mod, err := moduleRequest(r, body)
	if err != nil {
		return err
	}
	if wantsMLIR(r) {
		return s.graphMLIR(r.Context(), w, body, mod)
	}
	in, err := s.prepareGraph(r.Context(), body, mod)
	if err != nil {
		return err
	}
	return s.answerPlanned(r.Context(), w, in.key, in.req.Policy, false, func(ctx context.Context) ([]byte, *verdict, error) {
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

// prepareGraph decodes and validates a graph body (or takes mod, a raw module's request,
// when not nil) and computes its key. Importing a module stops with ctx's error once
// ctx is done.
func (s *Server) prepareGraph(ctx context.Context, body []byte, mod *GraphRequest) (*graphInput, error) {
	req, err := mod, error(nil)
	if req == nil {
		if req, err = readGraphRequest(body); err != nil {
			return nil, err
		}
		// Refuse too many tensors before their shardings are parsed.
		if n, most := len(req.wire.order), s.limits.MaxGraphTensors; most > 0 && n > most {
			return nil, tooManyTensors(n, most)
		}
	}
	if err := s.validateGraphRequest(req); err != nil {
		return nil, err
	}
	in := &graphInput{req: req, include: map[string]bool{}}
	var fes sharding.Errors
	if in.model, err = cost.Resolve(in.req.CostModel, "cost_model"); err != nil {
		fes = appendFieldErrors(fes, err)
	}
	if in.req.Module != "" {
		if err := s.importModule(ctx, in); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			fes = appendFieldErrors(fes, err)
		}
	} else {
		m, err := parseMesh(in.req.Mesh, "mesh", s.limits)
		if err != nil {
			return nil, err
		}
		in.mesh = m
		// Nested while regions cost a pass over their bytes per level when decoded:
		// refuse a graph nested far too deep from one linear scan first ("ops" lists
		// inside while regions: the top list, one per level, and one for a while's
		// possibly empty regions at the last level), then let toGraph name the
		// exact op.
		if path, deep := opsNesting(req, body, s.limits.MaxGraphDepth+2); s.limits.MaxGraphDepth > 0 && deep {
			return nil, limitExceeded(path, "while ops nest deeper than %d levels (SHARDPLAN_MAX_GRAPH_DEPTH); flatten the loops, or raise the limit", s.limits.MaxGraphDepth)
		}
		in.graph, in.opts, err = req.toGraph(m, s.limits.MaxGraphDepth)
		if de, ok := errors.AsType[*DepthError](err); ok {
			return nil, limitExceeded(de.Field, "while ops nest deeper than %d levels (SHARDPLAN_MAX_GRAPH_DEPTH); flatten the loops, or raise the limit", de.Limit)
		}
		if err != nil {
			fes = appendFieldErrors(fes, err)
		}
	}
	if len(fes) > 0 {
		return nil, fes
	}
	if err := s.checkGraphLimits(in.graph); err != nil {
		return nil, err
	}
	in.strategy = planner.Optimal
	if in.req.Strategy == string(planner.XLA) {
		in.strategy = planner.XLA
	}
	for _, i := range in.req.Include {
		in.include[i] = true
	}
	if in.remat, err = allowRemat(in.req.FullRematerialization, in.req.Policy); err != nil {
		return nil, err
	}
	in.effort = effortOf(in.req.Effort)
	in.key, err = graphKey(in)
	return in, err
}

// opsNesting is keyNesting(body, "ops", limit), from the levels readGraphRequest
// recorded when they tell.
func opsNesting(req *GraphRequest, body []byte, limit int) (string, bool) {
	if path, deep, known := req.wire.opsLevels.nesting(limit); known {
		return path, deep
	}
	return keyNesting(body, "ops", limit)
}

// validateGraphRequest checks the request-level rules (graph fields with or without
// module, then the validate tags) and lists every failure.
func (s *Server) validateGraphRequest(req *GraphRequest) error {
	fes := req.checkGraphPresence()
	if err := s.validateStruct(req); err != nil {
		p, ok := err.(*Problem)
		if !ok {
			return err
		}
		fes = append(fes, domainFieldErrors(p.Errors)...)
	}
	if len(fes) > 0 {
		return Invalid(slugInvalidRequest, "Invalid request", fes...)
	}
	return nil
}

// checkGraphLimits enforces the graph-size and rank limits.
func (s *Server) checkGraphLimits(g *propagation.Graph) error {
	lim := s.limits
	if lim.MaxGraphTensors > 0 && len(g.Tensors) > lim.MaxGraphTensors {
		return tooManyTensors(len(g.Tensors), lim.MaxGraphTensors)
	}
	if n := g.NumOps(); lim.MaxGraphOps > 0 && n > lim.MaxGraphOps {
		return limitExceeded("ops", "has %d ops (regions included); the limit is %d (SHARDPLAN_MAX_GRAPH_OPS)", n, lim.MaxGraphOps)
	}
	// The first id in sorted order whose shape is over the rank or element limit (or
	// has a dim < 1), found without sorting.
	bad, found := "", false
	var badErr error
	for id, t := range g.Tensors {
		if found && id > bad {
			continue
		}
		if err := shapeWithin(t.Shape, "tensors."+id+".shape", lim, 0); err != nil {
			bad, found, badErr = id, true, err
		}
	}
	return badErr
}

// tooManyTensors is the 400 of a graph of n tensors, over the limit most.
func tooManyTensors(n, most int) *Problem {
	return limitExceeded("tensors", "has %d tensors; the limit is %d (SHARDPLAN_MAX_GRAPH_TENSORS)", n, most)
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
	gp, err := graphplan.Plan(ctx, &graphplan.Request{Graph: in.graph, Mesh: in.mesh, Options: in.opts, Strategy: in.strategy, Model: in.model, AllowFullRemat: in.remat, Effort: in.effort, Memos: s.planMemos, Cores: s.lendCores})
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

// collectiveRenderer renders the collectives of one graph answer.
type collectiveRenderer struct {
	sw     *shardingWriter
	model  cost.Model
	lists  stepLists
	budget *listBudget
}

// render gives the wire form of gc; omitted says some per-device list was left out.
func (cr *collectiveRenderer) render(ctx context.Context, gc *graphplan.Collective) (c GraphCollective, omitted bool, err error) {
	steps, omitted, err := renderSteps(ctx, cr.sw, gc.Shape, gc.ElemBits, gc.Plan, cr.lists, cr.budget)
	if err != nil {
		return GraphCollective{}, false, err
	}
	ps := gc.Plan.Summary
	c = GraphCollective{OpName: gc.Op, Tensor: gc.Tensor, Kind: string(gc.Kind), Shape: gc.Shape,
		TimeUS: ps.TimeUS, BytesPerDevice: ps.BytesPerDevice, FullRematerialization: ps.FullRematerialization}
	if gc.Kind != graphplan.KindReshard {
		c.Reduction, c.MeshAxes, c.Steps = gc.Reduction, refStrings(gc.Axes), steps
		if gc.Dim >= 0 {
			d := gc.Dim
			c.Dim = &d
		}
		return c, omitted, nil
	}
	gp := &GraphPlan{Source: cr.sw.json(gc.From), Target: cr.sw.json(gc.To), Steps: steps, Summary: summaryJSON(gc.Plan, cr.model)}
	if info := gc.XLA; info != nil {
		c.XLAFallback = info.Fallback
		gp.Summary.XLAFallback = info.Fallback
		gp.XLAWarning, gp.XLAPath = info.Warning, info.Path
		gp.SuggestedConstraints = appendSuggestions(nil, info.Suggested, cr.sw)
		gp.SuggestionNote = info.SuggestionNote
	}
	c.Plan = gp
	return c, omitted, nil
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
