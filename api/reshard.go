package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// ReshardRequest is the body of POST /v1/reshard.
type ReshardRequest struct {
	// Mesh is a mesh object, the string "x=2,y=4", or a mesh as JAX, Shardy or torch print it.
	Mesh json.RawMessage `json:"mesh" validate:"required" swaggertype:"object"`
	// Shape is the global tensor shape; every dim >= 1 (or give tensor instead).
	Shape []int64 `json:"shape,omitempty" validate:"required_without=Tensor,dive,gte=1" example:"2048,2048"`
	// DType is the element type (or give element_bytes instead): an XLA name (pred, s8,
	// u8, s16, u16, f16, bf16, s32, u32, f32, s64, u64, f64, c64, c128, f8e4m3fn, f8e5m2,
	// s4, u4) or its NumPy/JAX/PyTorch spelling (float32, bfloat16, int8, bool,
	// jnp.float32, torch.float16, ...).
	DType string `json:"dtype,omitempty" example:"f32"`
	// ElementBytes is the element size in bytes, instead of dtype.
	ElementBytes *int `json:"element_bytes,omitempty" validate:"omitempty,gte=1,lte=64" minimum:"1" maximum:"64"`
	// Tensor is the shape and dtype in one, as MLIR or XLA print a tensor type
	// ("tensor<2048x2048xf32>", "f32[2048,2048]"), instead of shape and dtype.
	Tensor string `json:"tensor,omitempty" example:"tensor<2048x2048xf32>"`
	// Source and Target shardings, each in any input form (object, Shardy text,
	// PartitionSpec array or "P(...)" text, XLA HloSharding text, or DTensor
	// {"placements": [...]}).
	Source json.RawMessage `json:"source" validate:"required" swaggertype:"object"`
	Target json.RawMessage `json:"target" validate:"required" swaggertype:"object"`
	// CostModel is a profile name from GET /v1/cost-models or an object (default tpu-v5p).
	CostModel json.RawMessage `json:"cost_model,omitempty" swaggertype:"object"`
	// Strategy: optimal (default) or xla (predict XLA's SPMD partitioner).
	Strategy string `json:"strategy,omitempty" validate:"omitempty,oneof=optimal xla" enums:"optimal,xla"`
	// Include asks for extra lists: tiles, transfers, diagram, pairs (steps'
	// collective_permute pairs and all_to_all_v transfers as explicit lists, not runs),
	// schedule (every rank's ordered operations, API.md "Schedules").
	Include []string `json:"include,omitempty" validate:"omitempty,max=8,dive,oneof=tiles transfers diagram pairs schedule" enums:"tiles,transfers,diagram,pairs,schedule"`
	// AllowedOps restricts the step ops to those the caller's backend runs.
	AllowedOps []string `json:"allowed_ops,omitempty" validate:"omitempty,max=7,dive,oneof=slice all_gather all_to_all collective_permute all_to_all_v reduce_scatter all_reduce" enums:"slice,all_gather,all_to_all,collective_permute,all_to_all_v,reduce_scatter,all_reduce"`
	// Policy: forbid_full_rematerialization turns a plan that rematerializes into a 422.
	Policy *Policy `json:"policy,omitempty"`
	// FullRematerialization (strategy optimal): avoid (default) makes a plan without a
	// full rematerialization win whatever the times; allow makes the fastest plan win
	// even when it rematerializes (not with policy.forbid_full_rematerialization).
	FullRematerialization string `json:"full_rematerialization,omitempty" validate:"omitempty,oneof=avoid allow" enums:"avoid,allow"`
	// Effort (strategy optimal): thorough (default) searches on for a cheaper plan
	// beside the exact pass; fast stops at the exact pass, in about a third of the
	// time, with plans 2.4-5.0% slower on geomean (up to 2x); exhaustive searches every
	// state and op, anytime, until it proves its plan or its planning budget ends.
	Effort string `json:"effort,omitempty" validate:"omitempty,oneof=thorough fast exhaustive" enums:"thorough,fast,exhaustive"`
	// PlanningBudgetMS (strategy optimal) bounds the milliseconds the planner's
	// structured and complete passes spend (any effort; exhaustive: 2000 by default); at
	// most the request's deadline. When it ends the answer is the best plan found
	// (summary.optimality best_found).
	PlanningBudgetMS int `json:"planning_budget_ms,omitempty" validate:"omitempty,gte=1,lte=600000" minimum:"1" maximum:"600000"`
	// MemoryBudgetBytesPerDevice (strategy optimal) bounds the buffer any device holds at
	// any step of the plan (summary.peak_bytes_per_device): the fastest plan within it
	// wins; when none fits, a 422 names the smallest budget that admits a plan. Absent
	// (or null) is no budget; 0 and below are refused.
	MemoryBudgetBytesPerDevice *int64 `json:"memory_budget_bytes_per_device,omitempty" validate:"omitempty,gte=1" minimum:"1"`
} // @name ReshardRequest

// TilesPair lists the source and target tiles of every device.
type TilesPair struct {
	Source []DeviceTile `json:"source"`
	Target []DeviceTile `json:"target"`
} // @name TilesPair

// ReshardResponse is a plan.
type ReshardResponse struct {
	PlanID               string       `json:"plan_id"`
	Mesh                 MeshObject   `json:"mesh"`
	Shape                []int64      `json:"shape"`
	Source               ShardingJSON `json:"source"`
	Target               ShardingJSON `json:"target"`
	Steps                []StepJSON   `json:"steps"`
	Summary              SummaryJSON  `json:"summary"`
	SuggestedConstraints []Suggestion `json:"suggested_constraints"`
	// SuggestionNote says why suggested_constraints is empty when XLA falls back
	// (strategy xla).
	SuggestionNote string `json:"suggestion_note,omitempty"`
	XLAWarning     string `json:"xla_warning,omitempty"`
	// XLAPath names the ReshardNoCache branches XLA takes (strategy xla).
	XLAPath []string `json:"xla_path,omitempty"`
	// SourceHlo and TargetHlo are the endpoints in XLA's HloSharding text (strategy xla).
	SourceHlo string     `json:"source_hlo,omitempty"`
	TargetHlo string     `json:"target_hlo,omitempty"`
	Tiles     *TilesPair `json:"tiles,omitempty"`
	Transfers []Transfer `json:"transfers,omitempty"`
	Diagram   string     `json:"diagram,omitempty"`
	// Schedule (include "schedule") is every rank's ordered operations; GET
	// /v1/plans/{plan_id}/schedule?rank=N serves one rank's.
	Schedule *ScheduleJSON `json:"schedule,omitempty"`
	// ListsOmitted is true when per-device lists (pairs, transfers) were left out because
	// the mesh has more devices than the list limit; Note says how to ask for them.
	ListsOmitted bool   `json:"lists_omitted,omitempty"`
	Note         string `json:"note,omitempty"`
} // @name ReshardResponse

// reshardInput is a decoded, validated reshard request.
type reshardInput struct {
	req      ReshardRequest
	mesh     *sharding.Mesh
	elemBits int
	src, tgt sharding.Sharding
	model    cost.Model
	strategy planner.Strategy
	ops      []planner.Op
	include  map[string]bool
	remat    bool // full_rematerialization: allow
	effort   planner.Effort
	key      string
}

// budget is the request's memory budget in bytes per device, 0 for none.
func (in *reshardInput) budget() int64 {
	if b := in.req.MemoryBudgetBytesPerDevice; b != nil {
		return *b
	}
	return 0
}

// prepareReshard parses and validates the request's meaning and computes its key.
func (s *Server) prepareReshard(in *reshardInput) error {
	req := &in.req
	m, err := parseMesh(req.Mesh, "mesh", s.limits)
	if err != nil {
		return err
	}
	in.mesh = m
	if err := tensorType(req.Tensor, &req.Shape, &req.DType, req.ElementBytes); err != nil {
		return err
	}
	if err := checkShape(req.Shape, "shape", s.limits); err != nil {
		return err
	}
	if in.elemBits, err = elementBits(req.DType, req.ElementBytes, "dtype"); err != nil {
		return err
	}
	var fes sharding.Errors
	if in.src, err = sharding.Parse(req.Source, m, req.Shape, "source"); err != nil {
		fes = appendFieldErrors(fes, err)
	}
	if in.tgt, err = sharding.Parse(req.Target, m, req.Shape, "target"); err != nil {
		fes = appendFieldErrors(fes, err)
	}
	if in.model, err = cost.Resolve(req.CostModel, "cost_model"); err != nil {
		fes = appendFieldErrors(fes, err)
	}
	if len(fes) > 0 {
		return fes
	}
	in.strategy = planner.Optimal
	if req.Strategy == string(planner.XLA) {
		in.strategy = planner.XLA
	}
	for _, o := range req.AllowedOps {
		in.ops = append(in.ops, planner.Op(o))
	}
	for _, i := range req.Include {
		in.include[i] = true
	}
	if in.remat, err = allowRemat(req.FullRematerialization, req.Policy); err != nil {
		return err
	}
	in.effort = effortOf(req.Effort)
	in.key = reshardKey(in)
	return nil
}

// planMS is the planning budget a plan depends on: the request's (strategy optimal),
// else 0.
func planMS(in *reshardInput) int {
	if in.strategy != planner.Optimal {
		return 0
	}
	return in.req.PlanningBudgetMS
}

// reshardKey hashes the canonical request: the same request in any accepted input form
// gets the same key (and plan id).
func reshardKey(in *reshardInput) string {
	ops := slices.Clone(in.req.AllowedOps)
	slices.Sort(ops)
	inc := slices.Clone(in.req.Include)
	slices.Sort(inc)
	inc = slices.Compact(inc)
	model := modelFingerprint(in.model)
	canon := struct {
		V        string   `json:"v"`
		Kind     string   `json:"kind"`
		Mesh     string   `json:"mesh"`
		MeshName string   `json:"mesh_name"`
		IDs      []int    `json:"ids"`
		Shape    []int64  `json:"shape"`
		Bits     int      `json:"bits"`
		Src      string   `json:"src"`
		Tgt      string   `json:"tgt"`
		Model    string   `json:"model"`
		Strategy string   `json:"strategy"`
		Ops      []string `json:"ops"`
		Include  []string `json:"include"`
		// The options below are left out of the hashed bytes at their defaults: a request
		// that does not set them hashes as if the key had no such members.
		Remat      bool  `json:"remat,omitempty"`
		Fast       bool  `json:"fast,omitempty"`
		Budget     int64 `json:"budget,omitempty"`
		Exhaustive bool  `json:"exhaustive,omitempty"`
		PlanMS     int   `json:"plan_ms,omitempty"`
	}{planner.Version, "reshard", in.mesh.String(), in.mesh.Name, in.mesh.DeviceIDs, in.req.Shape, in.elemBits, in.src.Body(), in.tgt.Body(), model, string(in.strategy), ops, inc,
		in.remat && in.strategy == planner.Optimal, in.effort == planner.EffortFast && in.strategy == planner.Optimal,
		in.budget(),
		in.effort == planner.EffortExhaustive && in.strategy == planner.Optimal, planMS(in)}
	b, _ := json.Marshal(canon)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// reshard godoc
//
//	@Summary		Plan a reshard
//	@Description	Finds the cheapest collective schedule (slice, all_gather, all_to_all, collective_permute, all_to_all_v, reduce_scatter, all_reduce) that moves a tensor from `source` to `target` sharding, priced by `cost_model`, with the communication lower bound and efficiency beside it. `strategy: xla` predicts XLA's SPMD partitioner, flags its involuntary full rematerialization and suggests constraints that avoid it. With `Accept: text/plain` the answer is the mesh-contents diagram, then the totals, XLA's price beside the plan (when an `xla` candidate was priced) and the optimality against the time bound. `policy.forbid_full_rematerialization` turns a plan that rematerializes into a 422 carrying the plan.
//	@Tags			reshard
//	@Accept			json
//	@Produce		json
//	@Produce		text/plain
//	@Produce		image/svg+xml
//	@Produce		application/problem+json
//	@Param			request	body		ReshardRequest	true	"mesh, tensor, source and target shardings"
//	@Success		200		{object}	ReshardResponse
//	@Header			200		{string}	X-Cache	"hit or miss"
//	@Failure		400		{object}	Problem	"invalid JSON, field, sharding or cost model; or no plan with allowed_ops"
//	@Failure		413		{object}	Problem	"body too large"
//	@Failure		408		{object}	Problem	"the body did not arrive within SHARDPLAN_BODY_READ_TIMEOUT"
//	@Failure		415		{object}	Problem	"not JSON"
//	@Failure		401		{object}	Problem	"no or a wrong API key (when SHARDPLAN_API_KEYS is set)"
//	@Failure		429		{object}	Problem	"over the per-client rate limit (SHARDPLAN_RATE_LIMIT; Retry-After)"
//	@Failure		422		{object}	Problem	"policy violation: the plan (under `plan`) rematerializes; or response-too-large: the lists asked for exceed SHARDPLAN_MAX_RESPONSE_BYTES"
//	@Failure		503		{object}	Problem	"overloaded or timed out"
//	@Router			/v1/reshard [post]
func (s *Server) reshard(ctx context.Context, r *http.Request, raw []byte) (*answer, error) {
	in := &reshardInput{include: map[string]bool{}}
	if err := decodeBytes(raw, &in.req); err != nil {
		return nil, err
	}
	if err := s.validateStruct(&in.req); err != nil {
		return nil, err
	}
	text := wantsText(r)
	if text {
		in.req.Include = append(in.req.Include, "diagram") // the answer is the diagram
	}
	if err := s.prepareReshard(in); err != nil {
		return nil, err
	}
	return s.answerPlanned(ctx, in.key, in.req.Policy, text, func(ctx context.Context) ([]byte, *verdict, error) {
		resp, err := s.planReshard(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		v, err := resp.verdict()
		if err != nil {
			return nil, nil, err
		}
		body, err := encodeReshardJSON(resp)
		return body, v, err
	}, readReshardVerdict)
}

// drawnReshard answers a request that prefers image/svg+xml with the drawing of the
// JSON answer answerOf gives it; others with answerOf's answer.
func (s *Server) drawnReshard(answerOf answerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !wantsSVG(r) {
			return writeAnswer(answerOf)(w, r)
		}
		jr := r.Clone(r.Context())
		jr.Header.Set("Accept", "application/json")
		a, err := answerOf(jr)
		if err != nil {
			return err
		}
		var resp ReshardResponse
		if err := json.Unmarshal(a.body, &resp); err != nil {
			return fmt.Errorf("reshard answer for SVG: %w", err)
		}
		body, err := reshardSVG(&resp)
		if err != nil {
			return err
		}
		w.Header().Set("X-Cache", cacheStatus(a.hit))
		writeSVG(w, body)
		return nil
	}
}

// reshardView is what a reshard answer's verdict reads of it.
type reshardView struct {
	Summary              SummaryJSON     `json:"summary"`
	XLAWarning           string          `json:"xla_warning"`
	SuggestedConstraints json.RawMessage `json:"suggested_constraints"`
	SuggestionNote       string          `json:"suggestion_note"`
	Diagram              string          `json:"diagram"`
}

// readReshardVerdict reads the verdict of a memoized reshard answer.
func readReshardVerdict(body []byte) (*verdict, error) {
	var v reshardView
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	return v.verdict(), nil
}

// verdict gives r's verdict from the rendered answer.
func (r *ReshardResponse) verdict() (*verdict, error) {
	sc, err := rawJSON(r.SuggestedConstraints)
	if err != nil {
		return nil, err
	}
	v := reshardView{
		Summary:    r.Summary,
		XLAWarning: r.XLAWarning, SuggestedConstraints: sc, SuggestionNote: r.SuggestionNote, Diagram: r.Diagram,
	}
	return v.verdict(), nil
}

// verdict: a plan that rematerializes (or takes XLA's fallback) breaks
// forbid_full_rematerialization; the problem carries its suggested constraints.
func (v *reshardView) verdict() *verdict {
	out := &verdict{}
	if v.Diagram != "" {
		out.Diagram = v.Diagram + "\n" + ReshardTextSummary(v.Summary)
	}
	if !(remat{FullRematerialization: v.Summary.FullRematerialization, XLAFallback: v.Summary.XLAFallback}).any() {
		return out
	}
	detail := "the plan goes through an involuntary full rematerialization (every device holds the whole tensor)"
	if !v.Summary.FullRematerialization {
		detail = "XLA falls back to rematerializing the tensor within device groups (every device of a group holds the group's whole part)"
	}
	if v.XLAWarning != "" {
		detail += ": " + v.XLAWarning
	}
	out.Violated, out.Detail = true, detail
	out.Violations = []Violation{{Policy: "forbid_full_rematerialization", Message: detail, SuggestionNote: v.SuggestionNote}}
	out.SuggestedConstraints = v.SuggestedConstraints
	return out
}

// planReshard computes the response of a reshard request. The lists asked for in include
// are charged to the response budget before planning; step lists before they are built.
func (s *Server) planReshard(ctx context.Context, in *reshardInput) (*ReshardResponse, error) {
	budget := s.newBudget()
	if err := s.chargeIncludes(in, budget); err != nil {
		return nil, err
	}
	preq := &planner.Request{Mesh: in.mesh, Shape: in.req.Shape, ElemBits: in.elemBits, Source: in.src, Target: in.tgt, Model: in.model, AllowedOps: in.ops, AllowFullRemat: in.remat, Effort: in.effort,
		PlanningBudget: time.Duration(in.req.PlanningBudgetMS) * time.Millisecond,
		MemoryBudget:   in.budget(), Memos: s.planMemos}
	start := time.Now()
	p, info, err := planner.ReshardWith(ctx, in.strategy, preq)
	s.metrics.observePlan("reshard", in.strategy, start)
	if err != nil {
		var be *planner.BudgetError
		if errors.As(err, &be) {
			fix := "no plan exists on this mesh"
			if be.MinBudget > 0 {
				fix = "the smallest budget that admits a plan is " + strconv.FormatInt(be.MinBudget, 10)
			}
			p := Invalid(slugBudgetExceeded, "No plan within the memory budget", sharding.Fieldf("memory_budget_bytes_per_device",
				"no plan keeps every device's buffer within %d bytes: %s", be.Budget, fix))
			p.Status = http.StatusUnprocessableEntity
			if be.MinBudget > 0 {
				p.MinBudget = be.MinBudget
			}
			return nil, p
		}
		var npe *planner.NoPlanError
		if errors.As(err, &npe) {
			return nil, Invalid(slugInvalidRequest, "No plan with the allowed ops", sharding.Fieldf("allowed_ops", "%s", npe.Error()))
		}
		return nil, err
	}
	return s.renderPlan(ctx, in, p, info, budget)
}

// includeField is the wire path of item in include ("include[1]"), or "include".
func includeField(include []string, item string) string {
	if i := slices.Index(include, item); i >= 0 {
		return "include[" + itoa(i) + "]"
	}
	return "include"
}

// chargeIncludes charges the top-level lists include asks for (tiles, transfers) to
// budget, from counts, before anything is planned or built.
func (s *Server) chargeIncludes(in *reshardInput, budget *listBudget) error {
	m, shape := in.mesh, in.req.Shape
	if in.include["tiles"] {
		n := 2 * int64(m.NumDevices())
		if err := budget.charge(includeField(in.req.Include, "tiles"), n*newListShape(m, shape).tileBytes(),
			itoa(int(n))+" device tiles", `leave "tiles" out of include, or `+fewerDevices); err != nil {
			return err
		}
	}
	if in.include["transfers"] {
		return budget.chargeTransfers(includeField(in.req.Include, "transfers"), m, shape, stripUnreduced(in.src), stripUnreduced(in.tgt),
			`leave "transfers" out of include (the steps still say what moves), or `+fewerDevices)
	}
	return nil
}

// renderPlan builds the wire form of a plan; its lists are charged to budget first.
func (s *Server) renderPlan(ctx context.Context, in *reshardInput, p *planner.Plan, info *planner.XLAInfo, budget *listBudget) (*ReshardResponse, error) {
	m := in.mesh
	// The request's and the plan's shardings stay as they are while the answer renders.
	sw := &shardingWriter{m: m, stable: true}
	resp := &ReshardResponse{
		PlanID: in.key, Mesh: meshJSON(m), Shape: in.req.Shape,
		Source: sw.json(in.src), Target: sw.json(in.tgt),
		SuggestedConstraints: []Suggestion{},
	}
	var err error
	if resp.Steps, resp.ListsOmitted, err = renderSteps(ctx, sw, in.req.Shape, in.elemBits, p, s.stepLists(m, in.include), budget); err != nil {
		return nil, err
	}
	resp.Summary = summaryJSON(p, in.model)
	if info != nil {
		resp.Summary.XLAFallback = info.Fallback
		resp.XLAWarning = info.Warning
		resp.XLAPath = info.Path
		resp.SourceHlo, resp.TargetHlo = info.SourceHlo, info.TargetHlo
		resp.SuggestedConstraints = appendSuggestions(resp.SuggestedConstraints, info.Suggested, sw)
		resp.SuggestionNote = info.SuggestionNote
	}
	if in.include["tiles"] {
		resp.Tiles = &TilesPair{
			Source: deviceTilesOf(sharding.NewLayout(m, in.req.Shape, in.src).Tiles(nil)),
			Target: deviceTilesOf(sharding.NewLayout(m, in.req.Shape, in.tgt).Tiles(nil)),
		}
	}
	if in.include["transfers"] {
		// Already charged by chargeIncludes.
		ts, err := planner.TransfersContext(ctx, m, in.req.Shape, in.elemBits, stripUnreduced(in.src), stripUnreduced(in.tgt), false)
		if err != nil {
			return nil, err
		}
		resp.Transfers = transfersOf(ts)
	}
	if in.include["diagram"] {
		resp.Diagram = planner.Diagram(p)
	}
	if in.include["schedule"] {
		if resp.Schedule, err = s.reshardSchedule(ctx, in, p, budget); err != nil {
			return nil, err
		}
	}
	if resp.ListsOmitted {
		resp.Note = s.listsOmittedNote(m)
	}
	return resp, nil
}

func stripUnreduced(s sharding.Sharding) sharding.Sharding {
	c := s.Clone()
	c.Unreduced = nil
	return c
}

// The reshard answer's encoder: encodeReshardJSON.

// reshard writes ReshardResponse, member by member in the struct's order.
func (e *jsonAppender) reshard(r *ReshardResponse) {
	e.b = append(e.b, '{')
	e.key("plan_id", true)
	e.str(r.PlanID)
	e.key("mesh", false)
	e.mesh(&r.Mesh)
	e.key("shape", false)
	ints(e, r.Shape)
	e.key("source", false)
	e.sharding(&r.Source)
	e.key("target", false)
	e.sharding(&r.Target)
	e.key("steps", false)
	list(e, r.Steps, e.step)
	e.key("summary", false)
	e.summary(&r.Summary)
	e.key("suggested_constraints", false)
	list(e, r.SuggestedConstraints, e.suggestion)
	e.xlaNotes(r.SuggestionNote, r.XLAWarning, r.XLAPath)
	e.optStr(`,"source_hlo":`, r.SourceHlo)
	e.optStr(`,"target_hlo":`, r.TargetHlo)
	if r.Tiles != nil {
		e.b = append(e.b, `,"tiles":`...)
		e.ref(r.Tiles)
	}
	if len(r.Transfers) > 0 {
		e.b = append(e.b, `,"transfers":`...)
		e.transfers(r.Transfers)
	}
	e.optStr(`,"diagram":`, r.Diagram)
	if r.Schedule != nil {
		e.b = append(e.b, `,"schedule":`...)
		e.ref(r.Schedule)
	}
	if r.ListsOmitted {
		e.b = append(e.b, `,"lists_omitted":true`...)
	}
	e.optStr(`,"note":`, r.Note)
	e.b = append(e.b, '}')
}

// encodeReshardJSON encodes r exactly as encodeJSON does (TestReshardJSONMatchesEncodingJSON),
// by hand (jsonAppender), without reflection over the per-device lists. What the
// appender cannot write (NaN) goes to encodeJSON.
func encodeReshardJSON(r *ReshardResponse) ([]byte, error) {
	bp := answerScratch.Get().(*[]byte)
	buf := (*bp)[:0]
	if hint := reshardJSONSizeHint(r); cap(buf) < hint {
		buf = make([]byte, 0, hint)
	}
	e := jsonAppender{b: buf}
	e.reshard(r)
	var out []byte
	if e.err == nil {
		// The plan memo keeps answers at their capacity: a copy of the answer's size.
		out = make([]byte, len(e.b))
		copy(out, e.b)
	}
	if cap(e.b) <= maxScratch {
		*bp = e.b[:0]
	}
	answerScratch.Put(bp)
	if e.err != nil {
		return encodeJSON(r)
	}
	return out, nil
}

// answerScratch holds the buffers answers are encoded into before they are copied to
// their size, up to maxScratch each.
var answerScratch = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxScratch is the largest buffer answerScratch keeps.
const maxScratch = 4 << 20

// reshardJSONSizeHint is an upper estimate of r's encoding from the lengths of its
// per-device lists, which are nearly all of a large answer: a scratch buffer smaller
// than it is replaced by one that big, so that the buffer is not grown (and copied)
// while the answer is written. A transfer is bounded by the digits its numbers can have (device ids
// below the device count, range bounds up to the largest dim, bytes up to the
// tensor's).
func reshardJSONSizeHint(r *ReshardResponse) int {
	rank := len(r.Shape)
	devices, maxDim, elems := int64(1), int64(1), int64(1)
	for _, a := range r.Mesh.Axes {
		devices *= max(int64(a.Size), 1)
	}
	for _, d := range r.Shape {
		maxDim = max(maxDim, d)
		elems = min(elems*max(d, 1), 1<<50)
	}
	ls := listShape{devices: devices, rank: int64(rank), idDigits: digits(devices), dimDigits: digits(maxDim)}
	// transferBytes allows 20 digits for bytes; an element has at most 64 bytes.
	transfer := int(ls.transferBytes() - 20 + digits(64*elems))
	n := 8<<10 + len(r.Transfers)*transfer
	if r.Tiles != nil {
		n += (len(r.Tiles.Source) + len(r.Tiles.Target)) * (96 + 4*rank*24) // device, coords, ranges, shapes, padding
	}
	for _, st := range r.Steps {
		n += 2<<10 + len(st.Transfers)*transfer + len(st.Pairs)*int(ls.pairBytes()) + len(st.PairRuns)*96 + len(st.TransferRuns)*(2*transfer+16)
	}
	return min(n, maxSizeHint)
}

// maxSizeHint caps the buffer an answer's encoding starts with: a larger answer grows
// from there rather than reserve memory it may not use.
const maxSizeHint = 16 << 20
