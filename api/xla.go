package api

import (
	"context"
	"net/http"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// xlaResult is what the XLA strategy adds to a plan.
type xlaResult struct {
	Warning   string
	Suggested []suggested
}

type suggested struct {
	PartitionSpec string
	Sharding      sharding.Sharding
}

// xlaPlan predicts XLA's reshard.
func xlaPlan(_ context.Context, _ *planner.Request) (*planner.Plan, *xlaResult, error) {
	return nil, nil, NewProblem(http.StatusNotImplemented, "not-implemented", "Not implemented", "strategy xla is not available in this build")
}
