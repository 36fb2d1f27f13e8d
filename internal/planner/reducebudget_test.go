package planner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// TestOneAxisAllReduceBudget: a 1-axis all_reduce (the tensor unreduced over the axis,
// then replicated) under the planning budget. With a generous budget the 512- and
// 1,440-device axes are planned to the end on every GPU model. With a clock that has
// passed the budget at its first look after the start, every size from 512 to 65,536
// devices answers a plan at once, and a 65,536-device axis, whose passes cannot end
// before their first look at the clock, answers best_found, not proven.
func TestOneAxisAllReduceBudget(t *testing.T) {
	shape := []int64{8192, 8192}
	request := func(t *testing.T, devices, model string, budget time.Duration, now func() time.Time) *Request {
		m := mustMesh(t, "x="+devices)
		prof, ok := cost.Profile(model)
		require.True(t, ok, model)
		return &Request{Mesh: m, Shape: shape, ElemBits: 16, Model: prof, PlanningBudget: budget, now: now,
			AllowedOps: []Op{OpAllReduce},
			Source:     mustSharding(t, m, shape, `{"dims":[{"axes":[]},{"axes":[]}],"unreduced":["x"]}`),
			Target:     mustSharding(t, m, shape, `[[],[]]`)}
	}
	reduces := func(t *testing.T, p *Plan) {
		require.NotEmpty(t, p.Steps)
		for _, st := range p.Steps {
			assert.Equal(t, OpAllReduce, st.Op)
		}
		assert.Empty(t, p.Steps[len(p.Steps)-1].After.Unreduced, "the partial sums are reduced")
	}
	for _, model := range []string{"h100", "b200", "gb200-nvl72"} {
		for _, devices := range []string{"512", "1440"} {
			t.Run(model+"/"+devices+"/generous", func(t *testing.T) {
				p, err := Reshard(context.Background(), request(t, devices, model, time.Hour, nil))
				require.NoError(t, err)
				reduces(t, p)
				assert.Equal(t, OptimalityProven, p.Summary.Optimality)
			})
		}
	}
	// The clock reads t0 once (the planning deadline is set from it), then an hour on.
	late := func() func() time.Time {
		t0, calls := time.Unix(1e9, 0), 0
		return func() time.Time {
			if calls++; calls == 1 {
				return t0
			}
			return t0.Add(time.Hour)
		}
	}
	for _, devices := range []string{"512", "1440", "4096", "16384", "65536"} {
		t.Run("h100/"+devices+"/past the budget", func(t *testing.T) {
			p, err := Reshard(context.Background(), request(t, devices, "h100", 2*time.Second, late()))
			require.NoError(t, err)
			reduces(t, p)
			if devices == "65536" {
				assert.Equal(t, OptimalityBestFound, p.Summary.Optimality)
			}
		})
	}
}
