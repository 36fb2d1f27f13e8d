package audit

import (
	"context"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/hlo"
	"github.com/shardplan/shardplan/internal/planner"
)

// RematPlan is shardplan's plan of the reshard a compiled module's remat chain does,
// beside XLA's chain.
type RematPlan struct {
	// Reshard is the reshard as a graph collective (its plan the optimal one).
	Reshard *graphplan.Collective
	// SavedUS is the chain's time less the plan's.
	SavedUS float64
}

// MaxRematPlans bounds the remats of one module PlanRemats plans (the first ones in
// module order); a module with more is a module to fix before planning each.
const MaxRematPlans = 64

// PlanRemats plans, for every remat of a whose shardings on both sides read (Remat.From
// and To), the optimal reshard, and asks strategy xla for the constraints that let XLA
// avoid its fallback. Entries of remats whose sides do not read, or past
// MaxRematPlans, are nil; so are those not planned when ctx ends, which PlanRemats then
// reports by returning ctx's error beside the plans it made. memos are the planner's
// (planner.Request.Memos; nil: each reshard its own).
func PlanRemats(ctx context.Context, a *hlo.Analysis, model cost.Model, memos *planner.Memos) ([]*RematPlan, error) {
	out := make([]*RematPlan, len(a.Remats))
	for i := range a.Remats[:min(len(a.Remats), MaxRematPlans)] {
		r := &a.Remats[i]
		if r.From == nil || r.To == nil {
			continue
		}
		req := &planner.Request{Mesh: a.Mesh, Shape: r.Shape.Dims, ElemBits: hlo.ElemBits(r.Shape.Elem), Source: *r.From, Target: *r.To, Model: model, Memos: memos}
		p, err := planner.Reshard(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			continue // a reshard the planner cannot express: no plan beside
		}
		_, info, err := planner.ReshardXLA(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			info = nil
		}
		out[i] = &RematPlan{
			Reshard: &graphplan.Collective{Op: r.Slice, Tensor: r.Source, Kind: graphplan.KindReshard, Dim: -1, Shape: r.Shape.Dims,
				ElemBits: req.ElemBits, From: *r.From, To: *r.To, Plan: p, XLA: info},
			SavedUS: r.TimeUS - p.Summary.TimeUS,
		}
	}
	return out, nil
}
