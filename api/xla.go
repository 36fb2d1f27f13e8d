package api

import (
	"context"

	"github.com/shardplan/shardplan/internal/planner"
)

// xlaPlan predicts XLA's reshard (strategy "xla").
func xlaPlan(ctx context.Context, r *planner.Request) (*planner.Plan, *planner.XLAInfo, error) {
	return planner.ReshardXLA(ctx, r)
}
