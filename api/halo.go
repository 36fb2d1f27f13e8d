package api

import "github.com/shardplan/shardplan/internal/planner"

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
