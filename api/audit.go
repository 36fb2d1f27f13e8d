package api

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardplan/shardplan/internal/audit"
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/hlo"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// POST /v1/audit: where a whole program's communication time and memory go, line by
// line. A program (what POST /v1/graph takes: a graph, a StableHLO module, an
// application/mlir body) is planned as /v1/graph plans it and audited (internal/audit);
// a compiled HLO module ({"hlo_module": ...} or a text/x-hlo body) has what XLA emitted
// decoded and priced (internal/hlo).

// AuditRequest is the body of POST /v1/audit: every field of a graph request (a graph,
// or a StableHLO module), or a compiled HLO module in hlo_module with mesh and
// cost_model; plus the memory budget.
type AuditRequest struct {
	GraphRequest
	// HLOModule is the text of a compiled HLO module (jax.jit(f).lower(x).compile().as_text())
	// instead of a graph or a StableHLO module. Its collectives are decoded onto mesh
	// (checked against the module; without one, inferred from the module).
	HLOModule string `json:"hlo_module,omitempty" example:"HloModule jit_f, num_partitions=8 ..."`
	// MemoryBudgetBytesPerDevice flags the ops where the memory timeline exceeds it.
	MemoryBudgetBytesPerDevice *int64 `json:"memory_budget_bytes_per_device,omitempty" validate:"omitempty,gte=1" minimum:"1" example:"17179869184"`
	// Profile (hlo_module only) is the text of XLA's profile-guided latency estimator's
	// profile (a ProfiledInstructionsProto: costs { name: "all-gather-start.1" cost_us:
	// 7040.5 } ...): its measured costs replace the modelled prices of the
	// instructions they name in the schedule, and each site reports both.
	Profile string `json:"profile,omitempty" example:"costs { name: \"all-gather-start.1\" cost_us: 7040.5 }"`
} // @name AuditRequest

// hloAuditFields are the fields of a compiled module's audit.
var hloAuditFields = []string{"hlo_module", "mesh", "cost_model", "memory_budget_bytes_per_device", "profile"}

// hloAuditRequest is a compiled-module audit.
type hloAuditRequest struct {
	HLOModule                  string
	Mesh                       json.RawMessage
	CostModel                  json.RawMessage
	MemoryBudgetBytesPerDevice *int64
	Profile                    string
}

// AuditResponse is a program's or a compiled module's audit.
type AuditResponse struct {
	// Input is "program" (a graph or a StableHLO module) or "compiled" (an HLO module).
	Input     string     `json:"input" enums:"program,compiled"`
	Mesh      MeshObject `json:"mesh"`
	CostModel string     `json:"cost_model" example:"tpu-v5p"`
	// Strategy plans the program's reshards (program; default xla: what the compiler does).
	Strategy string `json:"strategy,omitempty" enums:"optimal,xla"`
	// Sites are every collective, dearest first (ties in program order).
	Sites []AuditSite `json:"sites"`
	// Memory is the program's per-device memory timeline (program only).
	Memory *AuditMemory `json:"memory,omitempty"`
	// Collectives are a compiled module's collectives in module order, decoded.
	Collectives []HLOCollective `json:"collectives,omitempty"`
	// Remats are a compiled module's full-rematerialization chains.
	Remats []HLORemat `json:"remats,omitempty"`
	// Parameters are a compiled module's entry parameters with their sharding= read on
	// the mesh.
	Parameters []HLOParameter `json:"parameters,omitempty"`
	Totals     AuditTotals    `json:"totals"`
	OpaqueOps  []OpaqueOpJSON `json:"opaque_ops,omitempty"`
	// MeshSource says where a compiled module's mesh comes from: request (the mesh
	// given, checked against the module), replica_groups (the named mesh its replica
	// groups print), shardings (axes read off its shardings' tile assignments) or
	// devices (one axis of every device); MeshNote says why.
	MeshSource string `json:"mesh_source,omitempty" enums:"request,replica_groups,shardings,devices"`
	MeshNote   string `json:"mesh_note,omitempty" example:"inferred from the iota reshape [2,8,4,4] of %param's sharding"`
	// Devices is a compiled module's device count and DevicesNote what says so (the
	// header's num_partitions and replica_count, else its groups and shardings).
	Devices     int    `json:"devices,omitempty" example:"256"`
	DevicesNote string `json:"devices_note,omitempty"`
	// Unmodeled are a compiled module's instructions that communicate but are not
	// priced (collective-broadcast, custom calls that may communicate, host transfers),
	// each with its line and why. The CLI's audit fails its gate on any unless told
	// --allow-unmodeled.
	Unmodeled []HLOUnmodeled `json:"unmodeled,omitempty"`
	// Roofline (compiled) is the compute roof the schedule prices compute ops with:
	// the cost model's peak bf16 FLOP rate and HBM bandwidth, with their sources.
	Roofline *AuditRoofline `json:"roofline,omitempty"`
	// ScheduleNotes (compiled) say what the schedule's figures leave out.
	ScheduleNotes []string `json:"schedule_notes,omitempty"`
	// ProfileUnmatched (compiled, with a profile) are the profile's names no
	// instruction of the module bears (the first 100).
	ProfileUnmatched []string `json:"profile_unmatched,omitempty"`
} // @name AuditResponse

// AuditRoofline is one device's compute roof.
type AuditRoofline struct {
	PeakBF16TFLOPS float64           `json:"peak_bf16_tflops" example:"459"`
	HBMGBps        float64           `json:"hbm_gbps" example:"2765"`
	Sources        map[string]string `json:"sources,omitempty"`
} // @name AuditRoofline

// AuditExposed is one site in the ranking by exposed time.
type AuditExposed struct {
	Rank int    `json:"rank" example:"1"`
	Op   string `json:"op" example:"all-gather-start.1"`
	// Site is the site's rank in sites (by price).
	Site         int     `json:"site" example:"3"`
	ExposedUS    float64 `json:"exposed_us"`
	OverlappedUS float64 `json:"overlapped_us"`
	TimeUS       float64 `json:"time_us"`
} // @name AuditExposed

// HLOUnmodeled is an instruction that communicates but is not priced.
type HLOUnmodeled struct {
	Computation string `json:"computation"`
	Name        string `json:"name" example:"cb"`
	Opcode      string `json:"opcode" example:"collective-broadcast"`
	Line        int    `json:"line"`
	Column      int    `json:"column"`
	Reason      string `json:"reason"`
} // @name HLOUnmodeled

// AuditLocation is where a site comes from: the user's source file and line and the op
// name as the module's loc(...) (or an HLO instruction's metadata) prints them, and the
// line of the module's text.
type AuditLocation struct {
	File   string `json:"file,omitempty" example:"model.py"`
	Line   int    `json:"line,omitempty" example:"12"`
	OpName string `json:"op_name,omitempty" example:"jit(f)/dot_general"`
	// Function is the function the op was written in (a compiled module's stack
	// frame, from its metadata's stack_frame_id).
	Function   string `json:"function,omitempty" example:"main.<locals>.f"`
	ModuleLine int    `json:"module_line,omitempty" example:"7"`
} // @name AuditLocation

// AuditSite is one collective of the audited program or module.
type AuditSite struct {
	Rank     int           `json:"rank" example:"1"`
	Location AuditLocation `json:"location"`
	// Kind is reshard or reduction (program), or the collective (compiled module).
	Kind string `json:"kind" example:"reshard"`
	// Op is the graph op (program) or the HLO instruction (compiled) that needs it.
	Op     string   `json:"op" example:"mm"`
	Tensor string   `json:"tensor,omitempty" example:"x"`
	Shape  []int64  `json:"shape,omitempty"`
	Axes   []string `json:"mesh_axes,omitempty"`
	// Reduction is a reduction's collective (all_reduce or reduce_scatter).
	Reduction      string  `json:"reduction,omitempty"`
	BytesPerDevice int64   `json:"bytes_per_device"`
	TimeUS         float64 `json:"time_us"`
	// FullRematerialization: the site's plan (program) or XLA's emitted chain (compiled)
	// makes the whole tensor on every device.
	FullRematerialization bool `json:"full_rematerialization"`
	// XLAFullRematerialization (program reshards): XLA's partitioner would take its
	// last-resort path here; SuggestedConstraints then avoid it.
	XLAFullRematerialization bool         `json:"xla_full_rematerialization,omitempty"`
	XLATimeUS                *float64     `json:"xla_time_us,omitempty"`
	SuggestedConstraints     []Suggestion `json:"suggested_constraints,omitempty"`
	SuggestionNote           string       `json:"suggestion_note,omitempty"`
	// PeakBytesPerDevice is the largest buffer the site's plan makes.
	PeakBytesPerDevice int64 `json:"peak_bytes_per_device,omitempty"`
	// Plan (reshards) and Steps (reductions) are the site's plan, as /v1/graph gives it.
	Plan  *GraphPlan `json:"plan,omitempty"`
	Steps []StepJSON `json:"steps,omitempty"`
	// Collective is the site's index in collectives (compiled).
	Collective *int `json:"collective,omitempty"`
	// TripCount (compiled) is how many times the site runs per execution of the module:
	// the trip counts of the while loops around it multiplied. TimeUS and
	// BytesPerDevice count every run. TripCountNote says when a loop's count is not
	// known (the site is then counted once).
	TripCount     int64  `json:"trip_count,omitempty" example:"4"`
	TripCountNote string `json:"trip_count_note,omitempty"`
	// Note (compiled) says why the site's groups match no axes of the mesh; it is then
	// priced on its device groups as they are.
	Note string `json:"note,omitempty"`
	// ExposedUS and OverlappedUS (compiled) split the site's time over the step's
	// schedule: what the step waits on, and what runs behind the compute scheduled
	// between its start and done (every run; measured where the profile names it).
	ExposedUS    *float64 `json:"exposed_us,omitempty"`
	OverlappedUS *float64 `json:"overlapped_us,omitempty"`
	// MeasuredUS (compiled, with a profile) is the profile's cost of the site over
	// every run, beside the model's TimeUS.
	MeasuredUS *float64 `json:"measured_us,omitempty"`
} // @name AuditSite

// AuditMemory is the per-device memory timeline over the program's op order.
type AuditMemory struct {
	PeakBytesPerDevice int64         `json:"peak_bytes_per_device"`
	PeakOp             string        `json:"peak_op"`
	PeakLocation       AuditLocation `json:"peak_location"`
	// HeldBytesPerDevice are the arguments' and results' tiles, live throughout.
	HeldBytesPerDevice         int64  `json:"held_bytes_per_device"`
	MemoryBudgetBytesPerDevice *int64 `json:"memory_budget_bytes_per_device,omitempty"`
	// OverBudget: some op's bytes exceed the budget; OverBudgetOps lists them (the
	// first 100) and OverBudgetCount counts them.
	OverBudget      bool          `json:"over_budget"`
	OverBudgetOps   []string      `json:"over_budget_ops,omitempty"`
	OverBudgetCount int           `json:"over_budget_count,omitempty"`
	Timeline        []MemoryPoint `json:"timeline"`
} // @name AuditMemory

// MemoryPoint is the memory at one op: live tiles plus the transient buffers of its
// reshards and reductions.
type MemoryPoint struct {
	Op             string `json:"op"`
	LiveBytes      int64  `json:"live_bytes"`
	TransientBytes int64  `json:"transient_bytes"`
	Bytes          int64  `json:"bytes"`
} // @name MemoryPoint

// AuditTotals sum the sites.
type AuditTotals struct {
	// TimeUS sums every site (a serial upper bound; no overlap assumed).
	TimeUS         float64 `json:"time_us"`
	BytesPerDevice int64   `json:"bytes_per_device"`
	Sites          int     `json:"sites"`
	Top10TimeUS    float64 `json:"top10_time_us"`
	// Top10Share is Top10TimeUS / TimeUS (0 when nothing communicates).
	Top10Share float64 `json:"top10_share"`
	// FullRematerializations counts the sites whose plan (or XLA's emitted chain) makes
	// a whole tensor on every device.
	FullRematerializations int `json:"full_rematerializations"`
	// XLARemats (program) are the reshards XLA's partitioner would fully rematerialize,
	// with the constraints that avoid each.
	XLARemats []AuditRemat `json:"xla_remats"`
	// Unmodeled (compiled) counts the instructions that communicate but are not priced.
	Unmodeled int `json:"unmodeled,omitempty"`
	// StepUS (compiled) is the step's estimated time over its schedule: ComputeUS (the
	// compute ops at the roofline, or as measured) plus ExposedUS (the communication
	// the step waits on); OverlappedUS is the communication hidden behind compute.
	StepUS       *float64 `json:"step_us,omitempty"`
	ComputeUS    *float64 `json:"compute_us,omitempty"`
	ExposedUS    *float64 `json:"exposed_us,omitempty"`
	OverlappedUS *float64 `json:"overlapped_us,omitempty"`
	// ByExposed (compiled) ranks the sites the step waits on, most exposed first (the
	// first 10 with any exposed time).
	ByExposed []AuditExposed `json:"by_exposed,omitempty"`
	// Measured (compiled, with a profile) counts the instructions priced from it.
	Measured int `json:"measured,omitempty"`
} // @name AuditTotals

// AuditRemat is one site XLA would fully rematerialize, and its fix.
type AuditRemat struct {
	Rank                 int           `json:"rank"`
	Op                   string        `json:"op"`
	Tensor               string        `json:"tensor,omitempty"`
	Location             AuditLocation `json:"location"`
	TimeUS               float64       `json:"time_us"`
	SuggestedConstraints []Suggestion  `json:"suggested_constraints,omitempty"`
	SuggestionNote       string        `json:"suggestion_note,omitempty"`
} // @name AuditRemat

// HLOCollective is one collective instruction of a compiled module, decoded and priced.
type HLOCollective struct {
	Computation string `json:"computation" example:"main.0_spmd"`
	Name        string `json:"name" example:"all-gather.1"`
	Opcode      string `json:"opcode" example:"all-gather"`
	// Kind is the collective in the step vocabulary (all_gather, all_to_all, ...).
	Kind       string `json:"kind" example:"all_gather"`
	Line       int    `json:"line"`
	Column     int    `json:"column"`
	OpName     string `json:"op_name,omitempty" example:"jit(f)/reshard"`
	SourceFile string `json:"source_file,omitempty"`
	SourceLine int    `json:"source_line,omitempty"`
	// Function is the function of its stack frame (metadata's stack_frame_id), which
	// also gives SourceFile and SourceLine when the metadata does not.
	Function   string   `json:"function,omitempty"`
	ChannelID  int      `json:"channel_id,omitempty"`
	Dimensions []int64  `json:"dimensions,omitempty"`
	GroupSize  int      `json:"group_size"`
	GroupCount int      `json:"group_count"`
	Pairs      [][2]int `json:"pairs,omitempty"`
	// MeshAxes are the axes its groups run over (collective-permute: the axes some pair
	// moves along); AxesNote says why they are missing.
	MeshAxes []string `json:"mesh_axes"`
	AxesNote string   `json:"axes_note,omitempty"`
	InBytes  int64    `json:"in_bytes"`
	OutBytes int64    `json:"out_bytes"`
	// BytesPerDevice, TimeUS, LatencyUS and BandwidthUS count every run of the
	// instruction: one execution's times TripCount.
	BytesPerDevice        int64   `json:"bytes_per_device"`
	TimeUS                float64 `json:"time_us"`
	LatencyUS             float64 `json:"latency_us"`
	BandwidthUS           float64 `json:"bandwidth_us"`
	Link                  string  `json:"link,omitempty"`
	FullRematerialization bool    `json:"full_rematerialization"`
	// TripCount is how many times it runs per execution of the module (the while
	// loops around it); TripCountKnown is false when a loop's count is not known
	// (counted once; TripCountNote names the loop).
	TripCount      int64  `json:"trip_count" example:"1"`
	TripCountKnown bool   `json:"trip_count_known"`
	TripCountNote  string `json:"trip_count_note,omitempty"`
	// ExposedUS and OverlappedUS split its time over the step's schedule (every run).
	ExposedUS    float64 `json:"exposed_us"`
	OverlappedUS float64 `json:"overlapped_us"`
	// MeasuredUS is the profile's cost over every run, when the profile names it.
	MeasuredUS *float64 `json:"measured_us,omitempty"`
} // @name HLOCollective

// HLOParameter is an entry parameter of a compiled module.
type HLOParameter struct {
	Name string `json:"name" example:"param"`
	// Shape is one device's buffer; GlobalShape the whole array (from the sharding's
	// tile counts).
	Shape         []int64 `json:"shape"`
	GlobalShape   []int64 `json:"global_shape,omitempty"`
	DType         string  `json:"dtype" example:"f32"`
	Sharding      string  `json:"sharding,omitempty" example:"{devices=[2,1,4]<=[8] last_tile_dim_replicate}"`
	PartitionSpec string  `json:"partition_spec,omitempty" example:"P('X', None)"`
} // @name HLOParameter

// HLORemat is XLA's full-rematerialization pattern in a compiled module: gathers to the
// whole tensor, then a dynamic-slice.
type HLORemat struct {
	Computation    string   `json:"computation"`
	Gathers        []string `json:"gathers"`
	Slice          string   `json:"slice" example:"multiply_dynamic-slice_fusion"`
	Line           int      `json:"line"`
	Column         int      `json:"column"`
	Shape          []int64  `json:"shape"`
	Source         string   `json:"source"`
	SourceSharding string   `json:"source_sharding,omitempty"`
	// SourcePartitionSpec is SourceSharding on the request's mesh, when it reads there.
	SourcePartitionSpec string  `json:"source_partition_spec,omitempty"`
	OpName              string  `json:"op_name,omitempty"`
	TimeUS              float64 `json:"time_us"`
	BytesPerDevice      int64   `json:"bytes_per_device"`
	// TargetPartitionSpec is the sharding the dynamic-slice cuts (its start indices
	// evaluated for every partition), when it reads on the mesh.
	TargetPartitionSpec string `json:"target_partition_spec,omitempty"`
	// Plan is shardplan's plan of the same reshard (source to target) and SavedUS the
	// time it saves over XLA's chain; SuggestedConstraints let XLA avoid its fallback.
	Plan                 *GraphPlan   `json:"plan,omitempty"`
	SavedUS              *float64     `json:"saved_us,omitempty"`
	SuggestedConstraints []Suggestion `json:"suggested_constraints,omitempty"`
	// Note says why there is no plan beside (a side's sharding does not read).
	Note string `json:"note,omitempty"`
} // @name HLORemat

// audit godoc
//
//	@Summary		Audit a program before and after XLA: where the communication time and the memory go, line by line
//	@Description	Takes what POST /v1/graph takes (a graph, `module` with StableHLO text, or an `application/mlir` body) and answers every collective site the propagated program needs, ranked by time, with its source location from the module's `loc(...)` (file, line, op name), bytes, plan and whether it fully rematerializes; XLA's predicted remats with the sharding constraints that avoid each; and a per-device memory timeline (live tiles by last use, arguments and results held throughout, each reshard's largest buffer while it runs) with its peak, against `memory_budget_bytes_per_device`. Strategy defaults to `xla` (what the compiler does). A compiled HLO module (`hlo_module`, or a `text/x-hlo` body) instead has every emitted collective decoded onto `mesh` (checked against the module's devices and parameters' shardings; without one, inferred from the module's named-mesh replica groups or its shardings' tile assignments, `mesh_source` and `mesh_note` saying which), priced times the trip counts of the while loops around it (`trip_count`), totalled, and XLA's gather-then-dynamic-slice remats found; what communicates without a price is listed under `unmodeled` with its line and why. Sites carry the file, line and function of their metadata's stack frame. `Accept: text/plain` gives a terminal report.
//	@Tags			graph
//	@Accept			json
//	@Accept			application/mlir
//	@Accept			text/x-hlo
//	@Produce		json
//	@Produce		text/plain
//	@Produce		application/problem+json
//	@Param			request							body		AuditRequest	true	"a graph request (tensors/ops or module), or hlo_module; an application/mlir or text/x-hlo body is the module's text"
//	@Param			function						query		string			false	"application/mlir body: the function to audit (default main)"
//	@Param			mesh							query		string			false	"raw body: the mesh, as x=2,y=4 or as a framework prints it (without a mesh, a compiled module's is inferred from its named-mesh replica groups or shardings)"
//	@Param			strategy						query		string			false	"application/mlir body: xla (default) or optimal"	Enums(optimal, xla)
//	@Param			cost_model						query		string			false	"raw body: a cost model profile name"
//	@Param			memory_budget_bytes_per_device	query		int				false	"raw body: the per-device memory budget"
//	@Success		200								{object}	AuditResponse
//	@Failure		400								{object}	Problem	"invalid request, graph, module (naming its line and column), or an HLO module where StableHLO is expected (and the reverse)"
//	@Failure		401								{object}	Problem	"no or a wrong API key (when SHARDPLAN_API_KEYS is set)"
//	@Failure		408								{object}	Problem	"the body did not arrive within SHARDPLAN_BODY_READ_TIMEOUT"
//	@Failure		413								{object}	Problem	"body too large"
//	@Failure		415								{object}	Problem	"neither JSON, application/mlir nor text/x-hlo"
//	@Failure		422								{object}	Problem	"response-too-large"
//	@Failure		429								{object}	Problem	"over the per-client rate limit"
//	@Failure		503								{object}	Problem	"overloaded or timed out"
//	@Router			/v1/audit [post]
func (s *Server) audit(ctx context.Context, r *http.Request, body []byte) (*answer, error) {
	in, err := decodeAudit(r, body)
	if err != nil {
		return nil, err
	}
	var resp *AuditResponse
	if in.compiled != nil {
		resp, err = s.auditCompiled(ctx, in.compiled)
	} else {
		resp, err = s.auditProgram(ctx, in)
	}
	if err != nil {
		return nil, err
	}
	if wantsText(r) {
		return &answer{body: []byte(AuditText(resp))}, nil
	}
	out, err := encodeJSON(resp)
	if err != nil {
		return nil, err
	}
	return &answer{body: out}, nil
}

// auditInput is an audit request, read once: a program or a compiled module.
type auditInput struct {
	// program is a graph or a StableHLO module, read from body (nil for a raw module).
	program *GraphRequest
	body    []byte
	// budget is the program's memory budget per device (nil: none).
	budget *int64
	// compiled is a compiled HLO module (program is then nil).
	compiled *hloAuditRequest
}

// auditQuery lists the query parameters of a raw text/x-hlo body.
var auditQuery = []string{"mesh", "cost_model", "memory_budget_bytes_per_device"}

// decodeAudit reads an audit request: a JSON body, or a raw body (application/mlir or
// text/x-hlo) and its query parameters.
func decodeAudit(r *http.Request, body []byte) (*auditInput, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != hloMediaType && mt != mlirMediaType {
		return readAuditJSON(body)
	}
	q := r.URL.Query()
	var budget *int64
	if v := q.Get("memory_budget_bytes_per_device"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("memory_budget_bytes_per_device", "must be a positive integer of bytes (got %q)", v))
		}
		budget = &n
	}
	if mt == mlirMediaType {
		q.Del("memory_budget_bytes_per_device")
		req, err := moduleRequestOf(q, body)
		if err != nil {
			return nil, err
		}
		return &auditInput{program: req, budget: budget}, nil
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, Invalid(slugInvalidModule, "Invalid module", sharding.Fieldf(hlo.Field, "the request body is empty; send the compiled module's text"))
	}
	if err := checkQuery(q, auditQuery, "a text/x-hlo body"); err != nil {
		return nil, err
	}
	return &auditInput{compiled: &hloAuditRequest{HLOModule: string(body), Mesh: queryJSON(q, "mesh"), CostModel: queryJSON(q, "cost_model"),
		MemoryBudgetBytesPerDevice: budget}}, nil
}

// readAuditJSON reads a JSON audit body in one pass: a graph request's fields, plus
// hlo_module and memory_budget_bytes_per_device. A body with hlo_module is a compiled
// module's audit, which takes only hloAuditFields.
func readAuditJSON(body []byte) (*auditInput, error) {
	if string(bytes.TrimSpace(body)) == "null" {
		return nil, NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON", "the body must be a JSON object, not null")
	}
	var (
		keys      []string
		module    *string  // hlo_module, when given and not null
		moduleErr *Problem // hlo_module of the wrong type
		budget    json.RawMessage
		profile   string
		profErr   *Problem
	)
	req, top, err := readGraphBody(body, func(r *wireReader, key string) bool {
		keys = append(keys, key)
		switch {
		case foldEq(key, "hlo_module"):
			var text string
			given := r.peek() != 'n'
			moduleErr = r.topString(&text, key)
			if given {
				module = &text
			}
		case foldEq(key, "memory_budget_bytes_per_device"):
			budget = r.raw()
		case foldEq(key, "profile"):
			profErr = r.topString(&profile, key)
		default:
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	n, err := readBudget(budget)
	if module == nil {
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(keys, func(k string) bool { return foldEq(k, "profile") }) {
			return nil, Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("profile", "a measured profile prices a compiled module's instructions: send it with hlo_module"))
		}
		if top != nil {
			return nil, top
		}
		return &auditInput{program: req, body: body, budget: n}, nil
	}
	var fes []*sharding.FieldError
	for _, k := range slices.Compact(slices.Sorted(slices.Values(keys))) {
		if !slices.Contains(hloAuditFields, k) {
			fes = append(fes, sharding.Fieldf(k, "a compiled module's audit takes %s only; leave %s out, or send a program as module or a graph", strings.Join(hloAuditFields, ", "), k))
		}
	}
	switch {
	case len(fes) > 0:
		return nil, Invalid(slugInvalidRequest, "Invalid request", fes...)
	case moduleErr != nil:
		return nil, moduleErr
	case profErr != nil:
		return nil, profErr
	case top != nil:
		return nil, top
	case err != nil:
		return nil, err
	}
	return &auditInput{compiled: &hloAuditRequest{HLOModule: *module, Mesh: req.Mesh, CostModel: req.CostModel, MemoryBudgetBytesPerDevice: n, Profile: profile}}, nil
}

// readBudget reads memory_budget_bytes_per_device from its JSON value (nil: absent).
func readBudget(raw json.RawMessage) (*int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || n < 1 {
		return nil, Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("memory_budget_bytes_per_device", "must be a positive integer of bytes (got %s)", raw))
	}
	return &n, nil
}

// auditProgram plans and audits a graph or a StableHLO module; the strategy defaults to
// xla.
func (s *Server) auditProgram(ctx context.Context, ai *auditInput) (*AuditResponse, error) {
	in, err := s.prepareGraph(ctx, ai.body, ai.program)
	if err != nil {
		return nil, err
	}
	if in.req.Strategy == "" {
		in.strategy = planner.XLA
	}
	budget := ai.budget
	start := time.Now()
	effort, planBudget := in.planning()
	req := &audit.Request{Graph: in.graph, Mesh: in.mesh, Options: in.opts, Strategy: in.strategy, Model: in.model, AllowFullRemat: in.remat, Effort: effort, PlanningBudget: planBudget, Memos: s.planMemos, Cores: s.lendCores}
	if budget != nil {
		req.BudgetBytes = *budget
	}
	locate := func(op string) AuditLocation { return AuditLocation{} }
	if imp := in.imp; imp != nil {
		locate = func(op string) AuditLocation {
			l, _ := imp.OpLocation(op)
			return AuditLocation{File: l.File, Line: l.Line, OpName: l.Name, ModuleLine: imp.OpLine(op)}
		}
		req.Locate = func(op string) audit.Location {
			l, _ := imp.OpLocation(op)
			return audit.Location{File: l.File, Line: l.Line, OpName: l.Name}
		}
	}
	res, err := audit.Run(ctx, req)
	s.metrics.observePlan("audit", in.strategy, start)
	if err != nil {
		return nil, in.locate(err)
	}
	m := in.mesh
	sw := &shardingWriter{m: m}
	cr := collectiveRenderer{sw: sw, model: in.model, lists: s.stepLists(m, in.include), budget: s.newBudget()}
	resp := &AuditResponse{Input: "program", Mesh: meshJSON(m), CostModel: in.model.Name(), Strategy: string(in.strategy), Sites: make([]AuditSite, len(res.Sites))}
	for i := range res.Sites {
		site := &res.Sites[i]
		gc, _, err := cr.render(ctx, site.Collective)
		if err != nil {
			return nil, err
		}
		as := AuditSite{Rank: i + 1, Location: locate(site.Op), Kind: gc.Kind, Op: gc.OpName, Tensor: gc.Tensor, Shape: gc.Shape, Axes: gc.MeshAxes,
			Reduction: gc.Reduction, BytesPerDevice: gc.BytesPerDevice, TimeUS: gc.TimeUS, FullRematerialization: gc.FullRematerialization,
			PeakBytesPerDevice: site.Plan.Summary.PeakBytesPerDevice, Plan: gc.Plan, Steps: gc.Steps}
		if site.Kind == graphplan.KindReshard {
			as.XLAFullRematerialization = site.XLARemat()
			if site.XLA != nil && in.strategy != planner.XLA {
				t := site.XLA.Summary.TimeUS
				as.XLATimeUS = &t
			}
			if info := site.XLAInfo; info != nil && as.XLAFullRematerialization {
				as.SuggestedConstraints = appendSuggestions(nil, info.Suggested, sw)
				as.SuggestionNote = info.SuggestionNote
			}
		}
		resp.Sites[i] = as
	}
	t := res.Totals
	resp.Totals = AuditTotals{TimeUS: t.TimeUS, BytesPerDevice: t.BytesPerDevice, Sites: t.Sites, Top10TimeUS: t.Top10TimeUS, Top10Share: t.Top10Share,
		FullRematerializations: t.FullRematerializations, XLARemats: []AuditRemat{}}
	for _, i := range t.XLARemats {
		as := &resp.Sites[i]
		resp.Totals.XLARemats = append(resp.Totals.XLARemats, AuditRemat{Rank: as.Rank, Op: as.Op, Tensor: as.Tensor, Location: as.Location,
			TimeUS: as.TimeUS, SuggestedConstraints: as.SuggestedConstraints, SuggestionNote: as.SuggestionNote})
	}
	mem := res.Memory
	am := &AuditMemory{PeakBytesPerDevice: mem.PeakBytesPerDevice, PeakOp: mem.PeakOp, HeldBytesPerDevice: mem.HeldBytes,
		MemoryBudgetBytesPerDevice: budget, OverBudget: len(mem.OverBudget) > 0, OverBudgetCount: len(mem.OverBudget),
		Timeline: make([]MemoryPoint, len(mem.Timeline))}
	if mem.PeakOp != "" {
		am.PeakLocation = locate(mem.PeakOp)
	}
	am.OverBudgetOps = mem.OverBudget[:min(len(mem.OverBudget), 100)]
	for i, p := range mem.Timeline {
		am.Timeline[i] = MemoryPoint{Op: p.Op, LiveBytes: p.LiveBytes, TransientBytes: p.TransientBytes, Bytes: p.Total()}
	}
	resp.Memory = am
	if in.imp != nil {
		resp.OpaqueOps = opaqueOpsJSON(in.imp.Opaque)
	}
	return resp, nil
}

// auditCompiled decodes and prices a compiled HLO module.
func (s *Server) auditCompiled(ctx context.Context, req *hloAuditRequest) (*AuditResponse, error) {
	var fes sharding.Errors
	if strings.TrimSpace(req.HLOModule) == "" {
		return nil, Invalid(slugInvalidModule, "Invalid module", sharding.Fieldf(hlo.Field, "is empty; paste the text of jax.jit(f).lower(x).compile().as_text()"))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	model, err := cost.Resolve(req.CostModel, "cost_model")
	if err != nil {
		fes = appendFieldErrors(fes, err)
	}
	var mesh *sharding.Mesh
	if raw := bytes.TrimSpace(req.Mesh); len(raw) > 0 && string(raw) != "null" {
		m, err := parseMesh(req.Mesh, "mesh", s.limits)
		if err != nil {
			return nil, err
		}
		mesh = m
	}
	lim := hlo.Limits{MaxInstructions: s.limits.MaxGraphOps, MaxDevices: s.limits.MaxDevices}
	mod, err := hlo.ParseContext(ctx, req.HLOModule, lim)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		fes = appendFieldErrors(fes, err)
	}
	var measured map[string]float64
	if strings.TrimSpace(req.Profile) != "" {
		if measured, err = hlo.ParseProfile(req.Profile); err != nil {
			fes = appendFieldErrors(fes, err)
		}
	}
	if len(fes) > 0 {
		return nil, fes
	}
	start := time.Now()
	// 256 distinct groupings of the largest mesh the server takes.
	a, err := hlo.Analyze(ctx, mod, hlo.Options{Mesh: mesh, MeshField: "mesh", Model: model, MaxDecodeWork: 256 * s.limits.MaxDevices, MaxDevices: s.limits.MaxDevices})
	s.metrics.observePlan("audit", planner.XLA, start)
	if err != nil {
		return nil, err
	}
	// shardplan's plans beside XLA's are an extra: they get half the time the request has
	// left, and the audit answers without those that do not finish in it.
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		pctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
	}
	plans, err := audit.PlanRemats(pctx, a, model, s.planMemos)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	unfinished := err != nil
	resp := compiledResponse(a, model)
	if err := scheduleResponse(ctx, resp, a, model, measured); err != nil {
		return nil, err
	}
	resp.MeshSource, resp.MeshNote, resp.Devices, resp.DevicesNote = a.MeshSource, a.MeshNote, a.Devices, a.DevicesNote
	for _, u := range a.Unmodeled {
		resp.Unmodeled = append(resp.Unmodeled, HLOUnmodeled{Computation: u.Computation, Name: u.Name, Opcode: u.Opcode, Line: u.Line, Column: u.Column, Reason: u.Reason})
	}
	resp.Totals.Unmodeled = len(a.Unmodeled)
	if resp.Memory, err = compiledMemory(ctx, a, req.MemoryBudgetBytesPerDevice); err != nil {
		return nil, err
	}
	sw := &shardingWriter{m: a.Mesh}
	cr := collectiveRenderer{sw: sw, model: model, lists: s.stepLists(a.Mesh, nil), budget: s.newBudget()}
	for i, rp := range plans {
		hr := &resp.Remats[i]
		hr.Note = a.Remats[i].Note
		if to := a.Remats[i].To; to != nil {
			hr.TargetPartitionSpec, _ = to.PartitionSpecText()
		}
		if rp == nil {
			if unfinished && hr.Note == "" && a.Remats[i].From != nil && a.Remats[i].To != nil {
				hr.Note = "not planned within half the request's time (SHARDPLAN_REQUEST_TIMEOUT): POST /v1/reshard with these shardings plans it alone"
			}
			if i >= audit.MaxRematPlans && hr.Note == "" {
				hr.Note = "not planned: a module's first " + strconv.Itoa(audit.MaxRematPlans) + " remats are"
			}
			continue
		}
		gc, _, err := cr.render(ctx, rp.Reshard)
		if err != nil {
			return nil, err
		}
		saved := rp.SavedUS
		hr.Plan, hr.SavedUS = gc.Plan, &saved
		if info := rp.Reshard.XLA; info != nil {
			hr.SuggestedConstraints = appendSuggestions(nil, info.Suggested, sw)
		}
		// The plan's own XLA fields describe the XLA prediction, not shardplan's plan.
		hr.Plan.XLAWarning, hr.Plan.XLAPath, hr.Plan.SuggestedConstraints, hr.Plan.SuggestionNote = "", nil, nil, ""
	}
	return resp, nil
}

// compiledMemory renders the estimate of one device's memory over the entry
// computation's schedule.
func compiledMemory(ctx context.Context, a *hlo.Analysis, budget *int64) (*AuditMemory, error) {
	mem, err := a.Memory(ctx)
	if err != nil {
		return nil, err
	}
	am := &AuditMemory{PeakBytesPerDevice: mem.PeakBytes, HeldBytesPerDevice: mem.HeldBytes, MemoryBudgetBytesPerDevice: budget,
		Timeline: make([]MemoryPoint, len(mem.Timeline))}
	for i, p := range mem.Timeline {
		am.Timeline[i] = MemoryPoint{Op: p.Instr, LiveBytes: p.LiveBytes, Bytes: p.LiveBytes}
		if budget != nil && p.LiveBytes > *budget {
			am.OverBudgetCount++
			if len(am.OverBudgetOps) < 100 {
				am.OverBudgetOps = append(am.OverBudgetOps, p.Instr)
			}
		}
	}
	am.OverBudget = am.OverBudgetCount > 0
	if len(mem.Timeline) > 0 {
		peak := mem.Timeline[mem.PeakIndex]
		am.PeakOp = peak.Instr
		in := a.Module.Entry.Instrs[mem.PeakIndex]
		md := hlo.ParseMetadata(in.Attrs["metadata"])
		am.PeakLocation = AuditLocation{File: md.SourceFile, Line: md.SourceLine, OpName: md.OpName, ModuleLine: peak.Line}
		if l, ok := a.Module.Frames.Resolve(md.StackFrameID); ok {
			am.PeakLocation.Function = l.Function
			if am.PeakLocation.File == "" {
				am.PeakLocation.File, am.PeakLocation.Line = l.File, l.Line
			}
		}
	}
	return am, nil
}

// compiledResponse renders a compiled module's analysis.
func compiledResponse(a *hlo.Analysis, model cost.Model) *AuditResponse {
	resp := &AuditResponse{Input: "compiled", Mesh: meshJSON(a.Mesh), CostModel: model.Name(),
		Collectives: make([]HLOCollective, len(a.Collectives)), Remats: []HLORemat{}}
	order := make([]int, len(a.Collectives))
	for i := range a.Collectives {
		c := &a.Collectives[i]
		order[i] = i
		run := float64(max(c.TripCount, 1))
		hc := HLOCollective{Computation: c.Computation, Name: c.Name, Opcode: c.Opcode, Kind: string(c.Kind), Line: c.Line, Column: c.Column,
			OpName: c.Metadata.OpName, SourceFile: c.Metadata.SourceFile, SourceLine: c.Metadata.SourceLine, ChannelID: c.ChannelID, Dimensions: c.Dims,
			GroupSize: c.GroupSize, GroupCount: c.GroupCount, MeshAxes: refStrings(c.MeshAxes), AxesNote: c.AxesNote,
			InBytes: c.InBytes, OutBytes: c.OutBytes, BytesPerDevice: c.TotalBytesPerDevice(),
			TimeUS: c.TimeUS(), LatencyUS: c.Cost.LatencyUS * run, BandwidthUS: c.Cost.BandwidthUS * run, Link: c.Cost.Link, FullRematerialization: c.FullRematerialization,
			TripCount: max(c.TripCount, 1), TripCountKnown: c.TripCountKnown, TripCountNote: c.TripCountNote}
		if l := c.Location; l != nil {
			hc.Function = l.Function
			if hc.SourceFile == "" {
				hc.SourceFile, hc.SourceLine = l.File, l.Line
			}
		}
		if len(c.Pairs) <= 1024 {
			hc.Pairs = c.Pairs
		}
		resp.Collectives[i] = hc
	}
	slices.SortStableFunc(order, func(x, y int) int {
		tx, ty := resp.Collectives[x].TimeUS, resp.Collectives[y].TimeUS
		switch {
		case tx > ty:
			return -1
		case tx < ty:
			return 1
		}
		return 0
	})
	resp.Sites = make([]AuditSite, len(order))
	t := &resp.Totals
	t.XLARemats = []AuditRemat{}
	for rank, i := range order {
		c := &resp.Collectives[i]
		idx := i
		resp.Sites[rank] = AuditSite{Rank: rank + 1, Location: AuditLocation{File: c.SourceFile, Line: c.SourceLine, OpName: c.OpName, Function: c.Function, ModuleLine: c.Line},
			Kind: c.Kind, Op: c.Name, Axes: c.MeshAxes, BytesPerDevice: c.BytesPerDevice, TimeUS: c.TimeUS, FullRematerialization: c.FullRematerialization, Collective: &idx,
			TripCount: c.TripCount, TripCountNote: c.TripCountNote}
		if len(c.MeshAxes) == 0 && c.AxesNote != "" {
			resp.Sites[rank].Note = c.AxesNote
		}
		t.TimeUS += c.TimeUS
		t.BytesPerDevice += c.BytesPerDevice
		if rank < 10 {
			t.Top10TimeUS += c.TimeUS
		}
		if c.FullRematerialization {
			t.FullRematerializations++
		}
	}
	t.Sites = len(order)
	if t.TimeUS > 0 {
		t.Top10Share = t.Top10TimeUS / t.TimeUS
	}
	for _, p := range a.Parameters() {
		hp := HLOParameter{Name: p.Name, Shape: p.Shape.Dims, GlobalShape: p.GlobalShape, DType: p.Shape.Elem, Sharding: p.Sharding}
		if p.Read != nil {
			hp.PartitionSpec, _ = p.Read.PartitionSpecText()
		}
		resp.Parameters = append(resp.Parameters, hp)
	}
	for _, r := range a.Remats {
		hr := HLORemat{Computation: r.Computation, Gathers: r.Gathers, Slice: r.Slice, Line: r.Line, Column: r.Column, Shape: r.Shape.Dims,
			Source: r.Source, SourceSharding: r.SourceSharding, OpName: r.Metadata.OpName, TimeUS: r.TimeUS, BytesPerDevice: r.BytesPerDevice}
		if r.SourceSharding != "" && len(r.Shape.Dims) > 0 {
			if sh, err := sharding.ParseHLO(r.SourceSharding, a.Mesh, r.Shape.Dims, "sharding"); err == nil {
				if ps, ok := sh.PartitionSpecText(); ok {
					hr.SourcePartitionSpec = ps
				}
			}
		}
		resp.Remats = append(resp.Remats, hr)
	}
	return resp
}

// scheduleResponse walks the module's schedule and fills the sites' exposed and
// overlapped times, the step's totals and the ranking by exposed time.
func scheduleResponse(ctx context.Context, resp *AuditResponse, a *hlo.Analysis, model cost.Model, measured map[string]float64) error {
	opts := hlo.ScheduleOptions{Measured: measured}
	if r, ok := cost.RooflineOf(model.Name()); ok {
		opts.Roofline = &r
		resp.Roofline = &AuditRoofline{PeakBF16TFLOPS: r.PeakBF16TFLOPS, HBMGBps: r.HBMGBps, Sources: r.Sources}
	}
	sch, err := a.Schedule(ctx, opts)
	if err != nil {
		return err
	}
	for i := range resp.Collectives {
		e := sch.Sites[i]
		hc := &resp.Collectives[i]
		hc.ExposedUS, hc.OverlappedUS = e.ExposedUS, e.OverlappedUS
		if e.Measured {
			m := e.MeasuredUS
			hc.MeasuredUS = &m
		}
	}
	order := make([]int, 0, len(resp.Sites))
	for k := range resp.Sites {
		site := &resp.Sites[k]
		hc := &resp.Collectives[*site.Collective]
		x, o := hc.ExposedUS, hc.OverlappedUS
		site.ExposedUS, site.OverlappedUS, site.MeasuredUS = &x, &o, hc.MeasuredUS
		if x > 0 {
			order = append(order, k)
		}
	}
	slices.SortStableFunc(order, func(x, y int) int {
		ex, ey := *resp.Sites[x].ExposedUS, *resp.Sites[y].ExposedUS
		switch {
		case ex > ey:
			return -1
		case ex < ey:
			return 1
		}
		return 0
	})
	t := &resp.Totals
	for r, k := range order[:min(len(order), 10)] {
		site := &resp.Sites[k]
		t.ByExposed = append(t.ByExposed, AuditExposed{Rank: r + 1, Op: site.Op, Site: site.Rank, ExposedUS: *site.ExposedUS, OverlappedUS: *site.OverlappedUS, TimeUS: site.TimeUS})
	}
	step, compute, exposed, overlapped := sch.StepUS, sch.ComputeUS, sch.ExposedUS, sch.OverlappedUS
	t.StepUS, t.ComputeUS, t.ExposedUS, t.OverlappedUS = &step, &compute, &exposed, &overlapped
	t.Measured = sch.MeasuredInstructions
	resp.ScheduleNotes = sch.Notes
	resp.ProfileUnmatched = sch.UnmatchedProfile[:min(len(sch.UnmatchedProfile), 100)]
	return nil
}
