package api

import (
	"context"
	"fmt"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The wire form of a plan (its steps, summary and suggested constraints) and of a
// graph's collectives, which the reshard, graph and audit answers share, and how they
// are rendered from planner.Plan and graphplan.Collective within the answer's budget.

// stepLists says how an answer writes its steps' per-device lists (collective_permute
// pairs, all_to_all_v and halo transfers): runs (PairRun, TransferRun)
// where they are shorter than the lists, the lists otherwise. Explicit (include
// "pairs") writes the lists whatever the runs. Above limit devices a list is never
// written unasked: a step whose runs are not within runLimit leaves it out.
type stepLists struct {
	explicit bool
	devices  int // the mesh's
	limit    int // SHARDPLAN_LIST_DEVICE_LIMIT
}

// stepLists is how an answer on m with include writes its steps' lists.
func (s *Server) stepLists(m *sharding.Mesh, include map[string]bool) stepLists {
	return stepLists{explicit: include["pairs"], devices: m.NumDevices(), limit: s.limits.ListDeviceLimit}
}

// overLimit reports whether the mesh is above the list limit.
func (l stepLists) overLimit() bool { return l.devices > l.limit }

// maxRuns is the most runs of runBytes each that a list of at most n entries of
// entryBytes each may be written as: fewer bytes than the list, or, above the list
// limit, up to most.
func (l stepLists) maxRuns(n, entryBytes, runBytes int64, most int) int {
	if l.overLimit() {
		return most
	}
	return int(max(0, (n*entryBytes-1)/runBytes))
}

// takesRuns reports whether runs (of runBytes each, standing for entries of entryBytes
// each) are written instead of the list: above the list limit, or when shorter.
func (l stepLists) takesRuns(runs, entries, entryBytes, runBytes int64) bool {
	return l.overLimit() || runs*runBytes < entries*entryBytes
}

// pairCount and transferCount are the entries runs stand for.
func pairCount(runs []planner.PairRun) (n int64) {
	for _, r := range runs {
		n += int64(r.Count)
	}
	return n
}

func transferCount(runs []planner.TransferRun) (n int64) {
	for _, r := range runs {
		n += int64(r.Count)
	}
	return n
}

// renderSteps gives the wire form of p's steps for a tensor of shape and element size
// bits on sw's mesh, the shardings rendered by sw (the steps of a graph's collectives
// repeat a few shardings), their lists written as lists says. Every list and run list is
// charged to budget before it is built (a 422 when over); omitted says some list was left
// out (above the list limit, where runs do not compress). Rendering stops with ctx's
// error once ctx is done (between steps and while transfers are walked).
func renderSteps(ctx context.Context, sw *shardingWriter, shape []int64, bits int, p *planner.Plan, lists stepLists, budget *listBudget) (steps []StepJSON, omitted bool, err error) {
	m := sw.m
	ls := newListShape(m, shape)
	steps = make([]StepJSON, 0, len(p.Steps))
	for _, st := range p.Steps {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		sj := StepJSON{
			Op: string(st.Op), MeshAxes: refStrings(st.MeshAxes),
			Before: sw.json(st.Before), After: sw.json(st.After),
			LocalShapeBefore: st.LocalShapeBefore, LocalShapeAfter: st.LocalShapeAfter,
			GroupSize: st.GroupSize, GroupCount: st.GroupCount, BytesPerDevice: st.BytesPerDevice,
			Link: st.Cost.Link, TimeUS: st.Cost.TimeUS, LatencyUS: st.Cost.LatencyUS, BandwidthUS: st.Cost.BandwidthUS,
		}
		var o bool
		switch st.Op {
		case planner.OpSlice:
			sj.Dims = st.Dims
		case planner.OpAllGather, planner.OpReduceScatter:
			d := st.Dim
			sj.Dim = &d
		case planner.OpAllToAll:
			a, b := st.SplitDim, st.ConcatDim
			sj.SplitDim, sj.ConcatDim = &a, &b
		case planner.OpCollectivePermute:
			if st.Halo != nil {
				o, err = renderHalo(&sj, st.Halo, lists, budget, ls)
			} else {
				o, err = renderPairs(&sj, m, shape, &st, lists, budget, ls)
			}
		case planner.OpAllToAllV:
			o, err = renderTransfers(ctx, &sj, m, shape, bits, &st, lists, budget, ls)
		}
		if err != nil {
			return nil, false, err
		}
		omitted = omitted || o
		steps = append(steps, sj)
	}
	return steps, omitted, nil
}

const stepsFix = `restrict allowed_ops (collective_permute and all_to_all_v carry per-device lists), or ` + fewerDevices

// renderPairs fills a collective_permute's pairs, or its pair runs.
func renderPairs(sj *StepJSON, m *sharding.Mesh, shape []int64, st *planner.Step, lists stepLists, budget *listBudget, ls listShape) (omitted bool, err error) {
	if !lists.explicit {
		runs, ok := planner.PairRuns(m, shape, st.Before, st.After, lists.maxRuns(ls.devices, ls.pairBytes(), ls.pairRunBytes(), lists.limit))
		switch {
		case ok && lists.takesRuns(int64(len(runs)), pairCount(runs), ls.pairBytes(), ls.pairRunBytes()):
			if err := budget.charge("steps", int64(len(runs))*ls.pairRunBytes(), itoa(len(runs))+" collective_permute pair runs", stepsFix); err != nil {
				return false, err
			}
			sj.PairRuns = pairRunsOf(runs)
			return false, nil
		case lists.overLimit():
			return true, nil
		}
	}
	if err := budget.charge("steps", ls.devices*ls.pairBytes(), itoa(int(ls.devices))+" collective_permute pairs", stepsFix); err != nil {
		return false, err
	}
	// Sorted by sender, as XLA prints source_target_pairs and API.md lists them.
	sj.Pairs = planner.ByColumn(planner.Pairs(m, shape, st.Before, st.After), 0)
	return false, nil
}

// renderTransfers fills an all_to_all_v's transfers, or its transfer runs.
func renderTransfers(ctx context.Context, sj *StepJSON, m *sharding.Mesh, shape []int64, bits int, st *planner.Step, lists stepLists, budget *listBudget, ls listShape) (omitted bool, err error) {
	if !lists.explicit {
		n := planner.TransferCount(m, shape, st.Before, st.After)
		if lists.overLimit() && n > maxRunTransfers {
			return true, nil
		}
		runs, ok, err := planner.TransferRunsContext(ctx, m, shape, bits, st.Before, st.After, st.NearestHolders,
			lists.maxRuns(n, ls.transferBytes(), 2*ls.transferBytes(), 8*lists.limit))
		switch {
		case err != nil:
			return false, err
		case ok && lists.takesRuns(int64(len(runs)), transferCount(runs), ls.transferBytes(), 2*ls.transferBytes()):
			if err := budget.charge("steps", int64(len(runs))*2*ls.transferBytes(), itoa(len(runs))+" all_to_all_v transfer runs", stepsFix); err != nil {
				return false, err
			}
			sj.TransferRuns = transferRunsOf(runs)
			return false, nil
		case lists.overLimit():
			return true, nil
		}
	}
	ts, err := budget.transfersWithin(ctx, "steps", m, shape, bits, st.Before, st.After, st.NearestHolders, stepsFix)
	sj.Transfers = transfersOf(ts)
	return false, err
}

// renderHalo fills the wire form of a halo collective_permute (strategy xla on uneven
// dims): its dim, and its pairs and transfers, as runs or lists.
func renderHalo(sj *StepJSON, h *planner.Halo, lists stepLists, budget *listBudget, ls listShape) (omitted bool, err error) {
	d := h.Dim
	sj.Dim = &d
	const fix = `restrict allowed_ops, or ` + fewerDevices
	n := int64(h.Count())
	if !lists.explicit {
		pairs, ok := h.PairRuns(lists.maxRuns(n, ls.pairBytes(), ls.pairRunBytes(), lists.limit))
		var transfers []planner.TransferRun
		if ok {
			transfers, ok = h.TransferRuns(lists.maxRuns(n, ls.transferBytes(), 2*ls.transferBytes(), 8*lists.limit))
		}
		switch {
		case ok && lists.takesRuns(int64(len(pairs))*ls.pairRunBytes()+int64(len(transfers))*2*ls.transferBytes(), n, ls.pairBytes()+ls.transferBytes(), 1):
			if err := budget.charge("steps", int64(len(pairs))*ls.pairRunBytes()+int64(len(transfers))*2*ls.transferBytes(), itoa(len(pairs))+" halo collective_permute pair runs", fix); err != nil {
				return false, err
			}
			sj.PairRuns, sj.TransferRuns = pairRunsOf(pairs), transferRunsOf(transfers)
			return false, nil
		case lists.overLimit():
			return true, nil
		}
	}
	if err := budget.charge("steps", n*(ls.pairBytes()+ls.transferBytes()), itoa(int(n))+" halo collective_permute pairs and transfers", fix); err != nil {
		return false, err
	}
	sj.Pairs, sj.Transfers = h.Pairs(), transfersOf(h.Transfers())
	return false, nil
}

// listsOmittedNote is the note of an answer on m whose lists were left out.
func (s *Server) listsOmittedNote(m *sharding.Mesh) string {
	return fmt.Sprintf(listsNote, m.NumDevices(), s.limits.ListDeviceLimit)
}

// appendSuggestions renders XLA's suggested constraints onto dst.
func appendSuggestions(dst []Suggestion, sgs []planner.Suggestion, sw *shardingWriter) []Suggestion {
	for _, sg := range sgs {
		dst = append(dst, Suggestion{PartitionSpec: sg.PartitionSpec, Sharding: sw.json(sg.Sharding)})
	}
	return dst
}

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
