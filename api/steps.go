package api

import (
	"context"
	"fmt"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// renderSteps gives the wire form of p's steps for a tensor of shape and element size
// bits on sw's mesh, the shardings rendered by sw (the steps of a graph's collectives
// repeat a few shardings). With lists false, collective_permute pairs and all_to_all_v transfers are
// left out and omitted says so; with lists true each list is charged to budget before it
// is built (a 422 when over), and rendering stops with ctx's error once ctx is done
// (between steps and while transfers are built).
func renderSteps(ctx context.Context, sw *shardingWriter, shape []int64, bits int, p *planner.Plan, lists bool, runLimit int, budget *listBudget) (steps []StepJSON, omitted bool, err error) {
	m := sw.m
	ls := newListShape(m, shape)
	const stepsFix = `restrict allowed_ops (collective_permute and all_to_all_v carry per-device lists), or ` + fewerDevices
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
				o, err := renderHalo(&sj, st.Halo, lists, runLimit, budget, ls)
				if err != nil {
					return nil, false, err
				}
				omitted = omitted || o
				break
			}
			if !lists {
				runs, ok := planner.PairRuns(m, shape, st.Before, st.After, runLimit)
				if !ok {
					omitted = true
					break
				}
				if err := budget.charge("steps", int64(len(runs))*ls.pairRunBytes(), itoa(len(runs))+" collective_permute pair runs", stepsFix); err != nil {
					return nil, false, err
				}
				sj.PairRuns = runs
				break
			}
			if err := budget.charge("steps", ls.devices*ls.pairBytes(), itoa(int(ls.devices))+" collective_permute pairs", stepsFix); err != nil {
				return nil, false, err
			}
			// Sorted by sender, as XLA prints source_target_pairs and API.md lists them.
			sj.Pairs = planner.ByColumn(planner.Pairs(m, shape, st.Before, st.After), 0)
		case planner.OpAllToAllV:
			if !lists {
				if planner.TransferCount(m, shape, st.Before, st.After) > maxRunTransfers {
					omitted = true
					break
				}
				runs, ok, err := planner.TransferRunsContext(ctx, m, shape, bits, st.Before, st.After, st.NearestHolders, 8*runLimit)
				if err != nil {
					return nil, false, err
				}
				if !ok {
					omitted = true
					break
				}
				if err := budget.charge("steps", int64(len(runs))*2*ls.transferBytes(), itoa(len(runs))+" all_to_all_v transfer runs", stepsFix); err != nil {
					return nil, false, err
				}
				sj.TransferRuns = runs
				break
			}
			if sj.Transfers, err = budget.transfersWithin(ctx, "steps", m, shape, bits, st.Before, st.After, st.NearestHolders, stepsFix); err != nil {
				return nil, false, err
			}
		}
		steps = append(steps, sj)
	}
	return steps, omitted, nil
}

// renderHalo fills the wire form of a halo collective_permute (strategy xla on uneven
// dims): its dim, and its pairs and transfers, explicit (charged to budget first) or,
// without lists, as runs. omitted is true when the runs do not compress.
func renderHalo(sj *StepJSON, h *planner.Halo, lists bool, runLimit int, budget *listBudget, ls listShape) (omitted bool, err error) {
	d := h.Dim
	sj.Dim = &d
	const fix = `restrict allowed_ops, or ` + fewerDevices
	n := int64(h.Count())
	if lists {
		if err := budget.charge("steps", n*(ls.pairBytes()+ls.transferBytes()), itoa(int(n))+" halo collective_permute pairs and transfers", fix); err != nil {
			return false, err
		}
		sj.Pairs, sj.Transfers = h.Pairs(), h.Transfers()
		return false, nil
	}
	pairs, ok := h.PairRuns(runLimit)
	if !ok {
		return true, nil
	}
	transfers, ok := h.TransferRuns(8 * runLimit)
	if !ok {
		return true, nil
	}
	if err := budget.charge("steps", int64(len(pairs))*ls.pairRunBytes()+int64(len(transfers))*2*ls.transferBytes(), itoa(len(pairs))+" halo collective_permute pair runs", fix); err != nil {
		return false, err
	}
	sj.PairRuns, sj.TransferRuns = pairs, transfers
	return false, nil
}

// listsFor reports whether an answer on m gives per-device lists in full: the mesh is
// within the list limit, or include asks for "pairs".
func (s *Server) listsFor(m *sharding.Mesh, include map[string]bool) bool {
	return m.NumDevices() <= s.limits.ListDeviceLimit || include["pairs"]
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
