package planner

import (
	"context"
	"testing"
	"time"
)

// unevenHogs are reshards on a prime axis whose dims the axis does not divide: every
// move's coverage check (dimCovered) enumerates tens of thousands of shard coordinates.
var unevenHogs = []hogReshard{
	{name: "x=65521 gather", mesh: "x=65521", shape: []int64{200000}, src: `[["x"]]`, tgt: `[null]`},
	{name: "x=65521 gather fast", mesh: "x=65521", shape: []int64{200000}, src: `[["x"]]`, tgt: `[null]`, effort: EffortFast},
	{name: "x=65521 swap dims", mesh: "x=65521", shape: []int64{200000, 7}, src: `[["x"], null]`, tgt: `[null, ["x"]]`},
	{name: "x=65521 gather xla", mesh: "x=65521", shape: []int64{200000}, src: `[["x"]]`, tgt: `[null]`, strategy: XLA},
}

// BenchmarkUnevenDeadline plans each uneven hog under a 1 ms deadline and reports how
// long after the deadline Reshard (ReshardXLA for strategy xla) returned: late-ms, the
// mean over the iterations.
func BenchmarkUnevenDeadline(b *testing.B) {
	for _, h := range unevenHogs {
		b.Run(h.name, func(b *testing.B) {
			var late time.Duration
			for b.Loop() {
				r := h.request(b)
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				dl, _ := ctx.Deadline()
				if h.strategy == XLA {
					_, _, _ = ReshardXLA(ctx, r)
				} else {
					_, _ = Reshard(ctx, r)
				}
				late += max(time.Since(dl), 0)
				cancel()
			}
			b.ReportMetric(float64(late.Microseconds())/1e3/float64(b.N), "late-ms")
		})
	}
}
