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
	"strings"
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
	// collective_permute pairs and all_to_all_v transfers as explicit lists, not runs).
	Include []string `json:"include,omitempty" validate:"omitempty,max=8,dive,oneof=tiles transfers diagram pairs" enums:"tiles,transfers,diagram,pairs"`
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

// Policy is what a CI gate refuses.
type Policy struct {
	ForbidFullRematerialization bool `json:"forbid_full_rematerialization"`
} // @name Policy

// StepJSON is one step of a plan (API.md step ops and their fields).
type StepJSON struct {
	Op        string `json:"op" example:"collective_permute" enums:"slice,all_gather,all_to_all,collective_permute,all_to_all_v,reduce_scatter,all_reduce"`
	Dims      []int  `json:"dims,omitempty"`
	Dim       *int   `json:"dim,omitempty"`
	SplitDim  *int   `json:"split_dim,omitempty"`
	ConcatDim *int   `json:"concat_dim,omitempty"`
	// MeshAxes are the axes (or sub-axes) the step's groups span.
	MeshAxes []string `json:"mesh_axes"`
	// Pairs ([from, to] device ids) of a collective_permute.
	Pairs [][2]int `json:"pairs,omitempty"`
	// Transfers of an all_to_all_v, or of a halo collective_permute (strategy xla on
	// uneven dims: before equals after, dim is the dim, and the receivers keep the
	// pieces for the next step).
	Transfers []Transfer `json:"transfers,omitempty"`
	// PairRuns and TransferRuns are the compact form of pairs and transfers, given
	// instead of them where shorter (always above the list limit) unless include asks
	// for "pairs": each run stands for count entries, the i-th its first plus i times
	// its step (pairs: [from + i*from_step, to + i*to_step]; transfers: every number of
	// "first" plus i times the same number of "step").
	PairRuns         []PairRun     `json:"pair_runs,omitempty"`
	TransferRuns     []TransferRun `json:"transfer_runs,omitempty"`
	Before           ShardingJSON  `json:"before"`
	After            ShardingJSON  `json:"after"`
	LocalShapeBefore []int64       `json:"local_shape_before"`
	LocalShapeAfter  []int64       `json:"local_shape_after"`
	GroupSize        int           `json:"group_size"`
	GroupCount       int           `json:"group_count"`
	// BytesPerDevice is the most any device receives in this step.
	BytesPerDevice int64   `json:"bytes_per_device"`
	Link           string  `json:"link,omitempty" example:"ici"`
	TimeUS         float64 `json:"time_us"`
	LatencyUS      float64 `json:"latency_us"`
	BandwidthUS    float64 `json:"bandwidth_us"`
} // @name Step

// SummaryJSON totals a plan.
type SummaryJSON struct {
	Strategy                 string  `json:"strategy" example:"optimal"`
	CostModel                string  `json:"cost_model" example:"tpu-v5p"`
	Collectives              int     `json:"collectives"`
	TimeUS                   float64 `json:"time_us"`
	BytesPerDevice           int64   `json:"bytes_per_device"`
	LowerBoundBytesPerDevice int64   `json:"lower_bound_bytes_per_device"`
	Efficiency               float64 `json:"efficiency"`
	// TimeLowerBoundUS is the least time any schedule can take on the cost model's links
	// to move the data this reshard must move (the busiest device's missing bytes over
	// all it can receive at once, or the data a half of a torus axis needs over the
	// links into it, plus partial-sum reductions, plus one step's latency or, on torus
	// links, the hops some missing byte must travel from its nearest holder, whichever
	// is larger); 0 when the model does not describe its links. TimeEfficiency is
	// time_lower_bound_us / time_us.
	TimeLowerBoundUS      float64 `json:"time_lower_bound_us"`
	TimeEfficiency        float64 `json:"time_efficiency"`
	PeakBytesPerDevice    int64   `json:"peak_bytes_per_device"`
	FullRematerialization bool    `json:"full_rematerialization"`
	// XLAFallback (strategy xla) is true when XLA's last-resort path runs and logs its
	// "Involuntary full rematerialization" warning, also when it only replicates within
	// device groups (full_rematerialization then stays false). The policy fires on both.
	XLAFallback bool `json:"xla_fallback,omitempty"`
	// Optimality (strategy optimal) is "proven" when the planner's complete pass finished:
	// no plan is cheaper under this cost model, these allowed_ops, this
	// full_rematerialization rule and this memory budget. "best_found" otherwise, with
	// OptimalityGapUS, the plan's time above time_lower_bound_us.
	Optimality       string      `json:"optimality,omitempty" enums:"proven,best_found"`
	OptimalityGapUS  float64     `json:"optimality_gap_us,omitempty"`
	SearchExpansions int         `json:"search_expansions"`
	Candidates       []Candidate `json:"candidates,omitempty"`
} // @name Summary

// Suggestion is an intermediate sharding that avoids XLA's fallback when inserted as a
// sharding constraint.
type Suggestion struct {
	PartitionSpec string       `json:"partition_spec,omitempty" example:"P('D', ('X','Y'))"`
	Sharding      ShardingJSON `json:"sharding"`
} // @name Suggestion

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

// allowRemat reads a request's full_rematerialization (validated: "", avoid or allow):
// allow, refused beside a policy that forbids the plans it asks for.
func allowRemat(opt string, policy *Policy) (bool, error) {
	if opt != "allow" {
		return false, nil
	}
	if policy.forbidsRemat() {
		return false, Invalid(slugInvalidRequest, "Contradictory options", sharding.Fieldf("full_rematerialization",
			"allow lets the planner choose a plan that rematerializes, which policy.forbid_full_rematerialization refuses: leave one of them out"))
	}
	return true, nil
}

// effortOf reads a request's effort (validated: "", thorough, fast or exhaustive).
func effortOf(opt string) planner.Effort {
	switch opt {
	case string(planner.EffortFast):
		return planner.EffortFast
	case string(planner.EffortExhaustive):
		return planner.EffortExhaustive
	}
	return planner.EffortThorough
}

// planMS is the planning budget a plan depends on: the request's (strategy optimal),
// else 0.
func planMS(in *reshardInput) int {
	if in.strategy != planner.Optimal {
		return 0
	}
	return in.req.PlanningBudgetMS
}

func appendFieldErrors(fes sharding.Errors, err error) sharding.Errors {
	if more, ok := sharding.AsFieldErrors(err); ok {
		return append(fes, more...)
	}
	return append(fes, sharding.Fieldf("", "%v", err))
}

// modelFingerprint names model in a plan id by everything its answers depend on: the
// name and every figure (cost.Fabric.Fingerprint), so two requests share a plan id only
// when their models price alike. A model without a fingerprint (none the API resolves)
// is named by its name.
func modelFingerprint(model cost.Model) string {
	if cm, ok := model.(interface{ Fingerprint() string }); ok {
		return cm.Fingerprint()
	}
	return model.Name()
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
		Remat    bool     `json:"remat,omitempty"` // absent by default: the keys of earlier versions stand
		Fast     bool     `json:"fast,omitempty"`  // likewise
		Budget   int64    `json:"budget,omitempty"`
		// The exhaustive effort and the planning budget: absent by default, likewise.
		Exhaustive bool `json:"exhaustive,omitempty"`
		PlanMS     int  `json:"plan_ms,omitempty"`
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
//	@Description	Finds the cheapest collective schedule (slice, all_gather, all_to_all, collective_permute, all_to_all_v, reduce_scatter, all_reduce) that moves a tensor from `source` to `target` sharding, priced by `cost_model`, with the communication lower bound and efficiency beside it. `strategy: xla` predicts XLA's SPMD partitioner, flags its involuntary full rematerialization and suggests constraints that avoid it. With `Accept: text/plain` the answer is the mesh-contents diagram. `policy.forbid_full_rematerialization` turns a plan that rematerializes into a 422 carrying the plan.
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
func (s *Server) reshard(w http.ResponseWriter, r *http.Request) error {
	raw, err := readBody(r)
	if err != nil {
		return err
	}
	in := &reshardInput{include: map[string]bool{}}
	if err := decodeBytes(raw, &in.req); err != nil {
		return err
	}
	if err := s.validateStruct(&in.req); err != nil {
		return err
	}
	text := wantsText(r)
	if text {
		in.req.Include = append(in.req.Include, "diagram") // the answer is the diagram
	}
	if err := s.prepareReshard(in); err != nil {
		return err
	}
	return s.answerPlanned(r.Context(), w, in.key, in.req.Policy, text, func(ctx context.Context) ([]byte, *verdict, error) {
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

// drawnReshard answers a request that prefers image/svg+xml with the drawing of h's JSON
// answer to it (a problem answer is passed through as it is); others go to h.
func (s *Server) drawnReshard(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !wantsSVG(r) {
			return h(w, r)
		}
		jr := r.Clone(r.Context())
		jr.Header.Set("Accept", "application/json")
		rec := &bufferWriter{header: http.Header{}, code: http.StatusOK}
		if err := h(rec, jr); err != nil {
			return err
		}
		if rec.code != http.StatusOK {
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.code)
			_, _ = w.Write(rec.body.Bytes())
			return nil
		}
		var resp ReshardResponse
		if err := json.Unmarshal(rec.body.Bytes(), &resp); err != nil {
			return fmt.Errorf("reshard answer for SVG: %w", err)
		}
		body, err := reshardSVG(&resp)
		if err != nil {
			return err
		}
		if c := rec.header.Get("X-Cache"); c != "" {
			w.Header().Set("X-Cache", c)
		}
		writeSVG(w, body)
		return nil
	}
}

func wantsText(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "text/plain") && !strings.Contains(a, "application/json")
}

// Violation is one entry of a 422 policy-violation's "violations": the policy, what
// broke it (a graph names the op and tensor of the reshard) and that reshard's
// suggested constraints.
type Violation struct {
	Policy  string `json:"policy" example:"forbid_full_rematerialization"`
	OpName  string `json:"op_name,omitempty"`
	Tensor  string `json:"tensor,omitempty"`
	Message string `json:"message"`
	// SuggestedConstraints are Suggestion objects (graph only; a reshard's are at the
	// top level of the problem).
	SuggestedConstraints json.RawMessage `json:"suggested_constraints,omitempty" swaggertype:"array,object"`
	// SuggestionNote says why there are no suggested constraints.
	SuggestionNote string `json:"suggestion_note,omitempty"`
} // @name Violation

// reshardView is what a reshard answer's verdict reads of it.
type reshardView struct {
	Summary              remat           `json:"summary"`
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
		Summary:    remat{FullRematerialization: r.Summary.FullRematerialization, XLAFallback: r.Summary.XLAFallback},
		XLAWarning: r.XLAWarning, SuggestedConstraints: sc, SuggestionNote: r.SuggestionNote, Diagram: r.Diagram,
	}
	return v.verdict(), nil
}

// verdict: a plan that rematerializes (or takes XLA's fallback) breaks
// forbid_full_rematerialization; the problem carries its suggested constraints.
func (v *reshardView) verdict() *verdict {
	out := &verdict{Diagram: v.Diagram}
	if !v.Summary.any() {
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

// summaryJSON totals p for the wire.
func summaryJSON(p *planner.Plan, model cost.Model) SummaryJSON {
	sum := p.Summary
	out := SummaryJSON{
		Strategy: string(sum.Strategy), CostModel: model.Name(), Collectives: sum.Collectives, TimeUS: sum.TimeUS,
		BytesPerDevice: sum.BytesPerDevice, LowerBoundBytesPerDevice: sum.LowerBoundBytesPerDevice,
		Efficiency: sum.Efficiency, TimeLowerBoundUS: sum.TimeLowerBoundUS, TimeEfficiency: sum.TimeEfficiency,
		PeakBytesPerDevice:    sum.PeakBytesPerDevice,
		FullRematerialization: sum.FullRematerialization, SearchExpansions: sum.SearchExpansions, Candidates: candidatesOf(sum.Candidates),
		Optimality: string(sum.Optimality),
	}
	if sum.Optimality == planner.OptimalityBestFound && sum.TimeLowerBoundUS > 0 {
		out.OptimalityGapUS = max(0, sum.TimeUS-sum.TimeLowerBoundUS)
	}
	return out
}
