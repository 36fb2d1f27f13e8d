package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/shardplan/shardplan/internal/cache"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/schedule"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The per-rank schedule of a plan (include "schedule" on /v1/reshard and /v1/transfer,
// and GET /v1/plans/{plan_id}/schedule): its wire form, its runs, and the route that
// serves one rank's list of a memoized plan.

// ScheduleOp is one operation of a rank (API.md "Schedules").
type ScheduleOp struct {
	Op       string     `json:"op" enums:"send,recv,copy"`
	Peer     int64      `json:"peer"`
	Tensor   int64      `json:"tensor"`
	Global   [][2]int64 `json:"global"`
	Src      string     `json:"src,omitempty" enums:"tile,halo,source,target,stage"`
	SrcIndex int64      `json:"src_index,omitempty"`
	SrcLocal [][2]int64 `json:"src_local,omitempty"`
	Dst      string     `json:"dst,omitempty" enums:"tile,halo,source,target,stage"`
	DstIndex int64      `json:"dst_index,omitempty"`
	DstLocal [][2]int64 `json:"dst_local,omitempty"`
	Reduce   bool       `json:"reduce,omitempty"`
	Bytes    int64      `json:"bytes"`
	Offset   int64      `json:"offset"`
	Tag      int64      `json:"tag"`
} // @name ScheduleOp

// ScheduleBuffer is a buffer a rank holds: its tile (reshard), its source and target
// tiles (transfer), or a halo or stage piece a phase creates.
type ScheduleBuffer struct {
	Tensor int64      `json:"tensor"`
	Buffer string     `json:"buffer" enums:"tile,halo,source,target,stage"`
	Index  int64      `json:"index"`
	Global [][2]int64 `json:"global"`
} // @name ScheduleBuffer

// SchedulePhase is one rank's part of a phase.
type SchedulePhase struct {
	Phase      int64            `json:"phase"`
	Bucket     int64            `json:"bucket"`
	Collective string           `json:"collective,omitempty" enums:"slice,all_gather,all_to_all,collective_permute,all_to_all_v,reduce_scatter,all_reduce"`
	Halo       bool             `json:"halo,omitempty"`
	Dims       []int64          `json:"dims,omitempty"`
	Group      []int64          `json:"group,omitempty"`
	Tile       [][2]int64       `json:"tile,omitempty"`
	KeepsTile  bool             `json:"keeps_tile,omitempty"`
	NewBuffers []ScheduleBuffer `json:"new_buffers,omitempty"`
	Ops        []ScheduleOp     `json:"ops"`
} // @name SchedulePhase

// ScheduleRank is one rank's schedule.
type ScheduleRank struct {
	Rank    int64            `json:"rank"`
	Buffers []ScheduleBuffer `json:"buffers"`
	Phases  []SchedulePhase  `json:"phases"`
} // @name ScheduleRank

// ScheduleRankRun stands for count ranks: the i-th is first with every number plus i
// times the same number of step (its texts and flags are first's).
type ScheduleRankRun struct {
	First ScheduleRank `json:"first"`
	Step  ScheduleRank `json:"step"`
	Count int          `json:"count"`
} // @name ScheduleRankRun

// ScheduleTensor is a tensor of a schedule: its bucket (transfer) and bytes.
type ScheduleTensor struct {
	Name        string  `json:"name"`
	Shape       []int64 `json:"shape"`
	ElementBits int     `json:"element_bits"`
	Bucket      int     `json:"bucket"`
	Bytes       int64   `json:"bytes"`
	// Fused (a part of a fused target): the part has no target buffers of its own;
	// its operations on "target" read and write the fused tensor's, at the part's
	// offset along the fused dim (API.md "Fused targets").
	Fused *ScheduleTensorFused `json:"fused,omitempty"`
	// Parts (a fused target tensor, listed after the moved tensors): the tensors
	// concatenated into it, in order. It has target buffers only and no operations.
	Parts []int `json:"parts,omitempty"`
} // @name ScheduleTensor

// ScheduleTensorFused places a part in its fused tensor: part index x along dim is
// fused index x+offset.
type ScheduleTensorFused struct {
	Tensor int   `json:"tensor"`
	Dim    int   `json:"dim"`
	Offset int64 `json:"offset"`
} // @name ScheduleTensorFused

// ScheduleJSON is every rank's schedule: ranks, or rank_runs where shorter.
type ScheduleJSON struct {
	Kind     string            `json:"kind" enums:"reshard,transfer"`
	Phases   int               `json:"phases"`
	Buckets  int               `json:"buckets"`
	Ops      int               `json:"ops"`
	Tensors  []ScheduleTensor  `json:"tensors"`
	Ranks    []ScheduleRank    `json:"ranks,omitempty"`
	RankRuns []ScheduleRankRun `json:"rank_runs,omitempty"`
} // @name Schedule

func boxJSON(b schedule.Box) [][2]int64 {
	if b == nil {
		return nil
	}
	return [][2]int64(b)
}

func ints64(xs []int) []int64 {
	if xs == nil {
		return nil
	}
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

func buffersJSON(bs []schedule.Buffer) []ScheduleBuffer {
	out := make([]ScheduleBuffer, len(bs))
	for i, b := range bs {
		out[i] = ScheduleBuffer{Tensor: int64(b.Tensor), Buffer: b.Name, Index: int64(b.Index), Global: boxJSON(b.Global)}
	}
	return out
}

// rankJSON is r's wire form.
func rankJSON(r *schedule.Rank) ScheduleRank {
	out := ScheduleRank{Rank: int64(r.Rank), Buffers: buffersJSON(r.Buffers), Phases: make([]SchedulePhase, len(r.Phases))}
	for i := range r.Phases {
		p := &r.Phases[i]
		sp := SchedulePhase{Phase: int64(p.Phase), Bucket: int64(p.Bucket), Collective: p.Collective, Halo: p.Halo, Dims: ints64(p.Dims),
			Group: ints64(p.Group), Tile: boxJSON(p.Tile), KeepsTile: p.KeepsTile, Ops: make([]ScheduleOp, len(p.Ops))}
		if len(p.NewBuffers) > 0 {
			sp.NewBuffers = buffersJSON(p.NewBuffers)
		}
		for k, o := range p.Ops {
			sp.Ops[k] = ScheduleOp{Op: o.Kind, Peer: int64(o.Peer), Tensor: int64(o.Tensor), Global: boxJSON(o.Global),
				Src: o.Src, SrcIndex: int64(o.SrcIndex), SrcLocal: boxJSON(o.SrcLocal), Dst: o.Dst, DstIndex: int64(o.DstIndex), DstLocal: boxJSON(o.DstLocal),
				Reduce: o.Reduce, Bytes: o.Bytes, Offset: o.Offset, Tag: int64(o.Tag)}
		}
		out.Phases[i] = sp
	}
	return out
}

// scheduleJSON is s's wire form: its ranks as runs where the runs' encoding is shorter.
func scheduleJSON(s *schedule.Schedule) (*ScheduleJSON, error) {
	out := &ScheduleJSON{Kind: s.Kind, Phases: s.Phases, Buckets: s.Buckets, Ops: s.Ops(), Tensors: make([]ScheduleTensor, len(s.Tensors))}
	for i, t := range s.Tensors {
		out.Tensors[i] = ScheduleTensor{Name: t.Name, Shape: t.Shape, ElementBits: t.ElemBits, Bucket: t.Bucket, Bytes: t.Bytes, Parts: t.Parts}
		if f := t.Fused; f != nil {
			out.Tensors[i].Fused = &ScheduleTensorFused{Tensor: f.Tensor, Dim: f.Dim, Offset: f.Offset}
		}
	}
	ranks := make([]ScheduleRank, len(s.Ranks))
	for i := range s.Ranks {
		ranks[i] = rankJSON(&s.Ranks[i])
	}
	runs, err := rankRuns(ranks)
	if err != nil {
		return nil, err
	}
	if len(runs) < len(ranks) {
		lb, err := json.Marshal(ranks)
		if err != nil {
			return nil, err
		}
		rb, err := json.Marshal(runs)
		if err != nil {
			return nil, err
		}
		if len(rb) < len(lb) {
			out.RankRuns = runs
			return out, nil
		}
	}
	out.Ranks = ranks
	return out, nil
}

// numbers calls f with every number of r, in a fixed order.
func (r *ScheduleRank) numbers(f func(*int64)) {
	f(&r.Rank)
	box := func(b [][2]int64) {
		for i := range b {
			f(&b[i][0])
			f(&b[i][1])
		}
	}
	bufs := func(bs []ScheduleBuffer) {
		for i := range bs {
			f(&bs[i].Tensor)
			f(&bs[i].Index)
			box(bs[i].Global)
		}
	}
	bufs(r.Buffers)
	for i := range r.Phases {
		p := &r.Phases[i]
		f(&p.Phase)
		f(&p.Bucket)
		for k := range p.Dims {
			f(&p.Dims[k])
		}
		for k := range p.Group {
			f(&p.Group[k])
		}
		box(p.Tile)
		bufs(p.NewBuffers)
		for k := range p.Ops {
			o := &p.Ops[k]
			f(&o.Peer)
			f(&o.Tensor)
			box(o.Global)
			f(&o.SrcIndex)
			box(o.SrcLocal)
			f(&o.DstIndex)
			box(o.DstLocal)
			f(&o.Bytes)
			f(&o.Offset)
			f(&o.Tag)
		}
	}
}

// clone is a deep copy of r.
func (r *ScheduleRank) clone() ScheduleRank {
	var c ScheduleRank
	b, _ := json.Marshal(r)
	_ = json.Unmarshal(b, &c)
	return c
}

// shape is r's encoding with every number 0: ranks of one shape differ in numbers alone.
func (r *ScheduleRank) shape() ([]byte, []int64, error) {
	c := r.clone()
	var nums []int64
	c.numbers(func(p *int64) { nums = append(nums, *p); *p = 0 })
	b, err := json.Marshal(&c)
	return b, nums, err
}

// rankRuns compresses ranks (ascending by rank) into runs: each run is a rank and the
// ranks at a constant stride after it whose schedules differ from it by a constant
// step (the next rank of its shape within runLookahead sets the stride). Ranks of a
// collective's group are seldom affine in each other, ranks of different groups are.
func rankRuns(ranks []ScheduleRank) ([]ScheduleRankRun, error) {
	shapes := make([][]byte, len(ranks))
	nums := make([][]int64, len(ranks))
	at := make(map[int64]int, len(ranks))
	for i := range ranks {
		var err error
		if shapes[i], nums[i], err = ranks[i].shape(); err != nil {
			return nil, err
		}
		at[ranks[i].Rank] = i
	}
	used := make([]bool, len(ranks))
	var out []ScheduleRankRun
	for i := range ranks {
		if used[i] {
			continue
		}
		used[i] = true
		members := []int{i}
		var st []int64
		for j := i + 1; j < len(ranks) && j <= i+runLookahead; j++ {
			if used[j] || !bytes.Equal(shapes[i], shapes[j]) {
				continue
			}
			st = make([]int64, len(nums[i]))
			for k := range st {
				st[k] = nums[j][k] - nums[i][k]
			}
			stride := ranks[j].Rank - ranks[i].Rank
			for n := int64(1); ; n++ {
				m, ok := at[ranks[i].Rank+n*stride]
				if !ok || used[m] || !bytes.Equal(shapes[i], shapes[m]) {
					break
				}
				same := true
				for k := range st {
					if nums[m][k] != nums[i][k]+n*st[k] {
						same = false
						break
					}
				}
				if !same {
					break
				}
				members = append(members, m)
			}
			break
		}
		if len(members) == 1 {
			st = nil
		}
		for _, m := range members {
			used[m] = true
		}
		r := ScheduleRankRun{First: ranks[i], Step: ranks[i].clone(), Count: len(members)}
		k := 0
		r.Step.numbers(func(p *int64) {
			*p = 0
			if st != nil {
				*p = st[k]
			}
			k++
		})
		out = append(out, r)
	}
	return out, nil
}

// runLookahead is how far after a rank rankRuns looks for the next of its run.
const runLookahead = 64

// expand is run's i-th rank.
func (run *ScheduleRankRun) expand(i int) ScheduleRank {
	r := run.First.clone()
	var steps []int64
	s := run.Step.clone()
	s.numbers(func(p *int64) { steps = append(steps, *p) })
	k := 0
	r.numbers(func(p *int64) { *p += int64(i) * steps[k]; k++ })
	return r
}

// rank finds rank id in s's ranks or runs.
func (s *ScheduleJSON) rank(id int64) (ScheduleRank, bool) {
	for _, r := range s.Ranks {
		if r.Rank == id {
			return r, true
		}
	}
	for i := range s.RankRuns {
		run := &s.RankRuns[i]
		d := id - run.First.Rank
		switch {
		case d == 0:
			return run.First, true
		case run.Step.Rank != 0 && d%run.Step.Rank == 0 && d/run.Step.Rank > 0 && d/run.Step.Rank < int64(run.Count):
			return run.expand(int(d / run.Step.Rank)), true
		}
	}
	return ScheduleRank{}, false
}

// scheduleFix says how to ask for a smaller schedule.
const scheduleFix = `leave "schedule" out of include, or ` + fewerDevices

// reshardSchedule builds, charges and renders p's schedule. Before it is built, a
// phase per rank and step is charged (what the least schedule takes); then its
// encoding.
func (s *Server) reshardSchedule(ctx context.Context, in *reshardInput, p *planner.Plan, budget *listBudget) (*ScheduleJSON, error) {
	field := includeField(in.req.Include, "schedule")
	least := 48 * int64(in.mesh.NumDevices()) * int64(max(1, len(p.Steps)))
	if err := budget.charge(field, least, "a schedule of "+itoa(in.mesh.NumDevices())+" ranks", scheduleFix); err != nil {
		return nil, err
	}
	sc, err := schedule.Reshard(ctx, p)
	if err != nil {
		return nil, err
	}
	return renderSchedule(sc, budget, field, least)
}

// renderSchedule is sc's wire form, its encoding (less what was charged already)
// charged to budget.
func renderSchedule(sc *schedule.Schedule, budget *listBudget, field string, charged int64) (*ScheduleJSON, error) {
	sj, err := scheduleJSON(sc)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(sj)
	if err != nil {
		return nil, err
	}
	if err := budget.charge(field, max(0, int64(len(b))-charged), strconv.Itoa(sj.Ops)+" schedule operations", scheduleFix); err != nil {
		return nil, err
	}
	return sj, nil
}

// ScheduleAnswer is one rank's schedule of a memoized plan, or every rank's.
type ScheduleAnswer struct {
	PlanID   string       `json:"plan_id"`
	Schedule ScheduleJSON `json:"schedule"`
} // @name ScheduleAnswer

// planSchedule godoc
//
//	@Summary		Fetch the schedule of a memoized plan, or one rank's
//	@Description	Returns the per-rank schedule of an earlier POST /v1/reshard or /v1/transfer asked with `include: ["schedule"]`, by its `plan_id`, while it is in the plan cache. With `rank` the answer's `schedule.ranks` holds that rank's list alone (expanded from its run), so a runtime fetches its own list once and replays it every step.
//	@Tags			reshard
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			plan_id	path		string	true	"plan id: 64 lowercase hex digits"	minlength(64)	maxlength(64)
//	@Param			rank	query		int		false	"one rank (device id)"	minimum(0)
//	@Success		200		{object}	ScheduleAnswer
//	@Failure		400		{object}	Problem	"malformed plan id or rank"
//	@Failure		404		{object}	Problem	"no memoized plan with this id, no schedule in it, or no such rank"
//	@Failure		503		{object}	Problem	"the plan store (Redis) is unavailable (with Retry-After)"
//	@Router			/v1/plans/{plan_id}/schedule [get]
func (s *Server) planSchedule(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "plan_id")
	if !cache.ValidPlanID(id) {
		return Invalid(slugInvalidRequest, "Invalid plan id",
			sharding.Fieldf("plan_id", "%q is not a plan id: want the 64 lowercase hex digits of a response's plan_id", truncate(id, 80)))
	}
	rank := int64(-1)
	if q := r.URL.Query().Get("rank"); q != "" {
		v, err := strconv.ParseInt(q, 10, 64)
		if err != nil || v < 0 {
			return Invalid(slugInvalidRequest, "Invalid rank", sharding.Fieldf("rank", "%q is not a rank: want a device id, 0 or more", truncate(q, 40)))
		}
		rank = v
	}
	pl, ok := s.memo.(PlanLookup)
	var body []byte
	if ok {
		b, found, err := pl.Lookup(r.Context(), id)
		switch {
		case err != nil && r.Context().Err() != nil:
			return r.Context().Err()
		case err != nil:
			p := NewProblem(http.StatusServiceUnavailable, slugStoreUnavailable, "Plan store unavailable",
				"the plan store cannot be read now, so whether plan %s exists is unknown; retry after the Retry-After seconds", id).
				WithHeader("Retry-After", strconv.Itoa(storeRetryAfterSeconds))
			p.cause = err
			return p
		case found:
			body = planEntryBody(b)
		}
	}
	if body == nil {
		return NewProblem(http.StatusNotFound, slugNotFound, "Plan not found",
			"no memoized plan with id %s; POST the request (with include \"schedule\") again to recompute it", id)
	}
	var held struct {
		Schedule *ScheduleJSON `json:"schedule"`
	}
	if err := json.Unmarshal(body, &held); err != nil {
		return err
	}
	if held.Schedule == nil {
		return NewProblem(http.StatusNotFound, slugNotFound, "No schedule in this plan",
			"plan %s was asked without a schedule; POST the request again with \"schedule\" in include, and fetch the plan_id of that answer", id)
	}
	out := ScheduleAnswer{PlanID: id, Schedule: *held.Schedule}
	if rank >= 0 {
		rk, ok := held.Schedule.rank(rank)
		if !ok {
			return NewProblem(http.StatusNotFound, slugNotFound, "No such rank",
				"rank %d has no operations in plan %s; ranks are the mesh's device ids (reshard) or the fabric's global ids that send or receive (transfer)", rank, id)
		}
		out.Schedule.Ranks, out.Schedule.RankRuns = []ScheduleRank{rk}, nil
	}
	return writeJSON(w, http.StatusOK, out)
}

// transferKey is the plan id of a transfer request: the hash of the request as decoded
// (the same body gets the same id).
func transferKey(req *TransferRequest) string {
	b, _ := json.Marshal(req)
	h := sha256.New()
	h.Write([]byte(KeyVersion))
	h.Write([]byte{0})
	h.Write([]byte("transfer"))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// keepTransfer writes a transfer answer that carries a schedule and keeps it in the
// plan cache under its plan id, for GET /v1/plans/{plan_id}(/schedule).
func (s *Server) keepTransfer(w http.ResponseWriter, r *http.Request, resp *TransferResponse) error {
	body, err := encodeJSON(resp)
	if err != nil {
		return err
	}
	stored, _, err := s.memo.Do(r.Context(), resp.PlanID, func(context.Context) ([]byte, error) { return body, nil })
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, "application/json", planEntryBody(stored))
	return nil
}
