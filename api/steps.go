package api

import (
	"context"
	"fmt"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

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
