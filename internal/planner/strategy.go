package planner

import "context"

// ReshardWith plans r with strategy s: Reshard for Optimal, ReshardXLA for XLA (its
// XLAInfo then beside the plan; nil for Optimal). It is the one place a strategy name
// becomes a planner call, for every caller that plans by strategy (a reshard request,
// each reshard of a graph). Its errors are those of the function it calls.
func ReshardWith(ctx context.Context, s Strategy, r *Request) (*Plan, *XLAInfo, error) {
	if s == XLA {
		return ReshardXLA(ctx, r)
	}
	p, err := Reshard(ctx, r)
	return p, nil, err
}
