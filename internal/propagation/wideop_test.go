package propagation

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWideConcatenate propagates one concatenate of 20,000 operands, each sharded on the
// concatenated dim: choosing its common axes and indexing its users is linear in the
// operands (both were quadratic: 50,000 operands held a compute slot for minutes). The
// budget is generous: the propagation takes well under a second.
func TestWideConcatenate(t *testing.T) {
	const n = 20000
	b := newBuilder(t, "x=2,y=4")
	in := make([]string, n)
	for i := range in {
		in[i] = fmt.Sprintf("t%d", i)
		ann := `sharding<@mesh, [{"x"}, {}]>`
		if i%2 == 1 {
			ann = `sharding<@mesh, [{"x", ?}, {?}]>`
		}
		b.tensor(in[i], []int64{4, 8}, ann)
	}
	b.tensor("out", []int64{4 * n, 8}, "")
	b.op("c", "concatenate", in, []string{"out"}, map[string]any{"dimension": 0})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := Propagate(ctx, b.g, b.m, DefaultOptions())
	require.NoError(t, err)
	assert.Equal(t, `[{"x", ?}, {?}]`, res.Shardings["out"].String(), "the operands' common axes")
	assert.Equal(t, `[{"x", ?}, {?}]`, res.Shardings["t1"].String())
}
