package planner

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestCancelMidCoverageCheck: a request cancelled while a coverage check enumerates
// answers the context's error, and the check stops at its next look at the done
// channel: the context is cancelled from the check's first look mid-enumeration, and
// no later look sees an enumeration that went on (every later check stops before its
// first coordinate).
func TestCancelMidCoverageCheck(t *testing.T) {
	for _, h := range unevenHogs {
		t.Run(h.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var atCancel, total int64 = -1, 0
			var after []int64
			coverPolled = func(visited, n int64) {
				switch {
				case atCancel >= 0:
					after = append(after, visited)
				case visited > 0:
					atCancel, total = visited, n
					cancel()
				}
			}
			defer func() { coverPolled = nil }()
			err := returnsWithin(t, func() error {
				if h.strategy == XLA {
					_, _, err := ReshardXLA(ctx, h.request(t))
					return err
				}
				_, err := Reshard(ctx, h.request(t))
				return err
			})
			require.ErrorIs(t, err, context.Canceled)
			require.GreaterOrEqual(t, atCancel, int64(0), "no coverage check enumerated: the input does not exercise dimCovered")
			assert.Less(t, atCancel, total, "cancelled after the check's first pass finished")
			for _, v := range after {
				assert.Zero(t, v, "a coverage check went on enumerating after its request was cancelled")
			}
		})
	}
}

// TestDimCoveredStopsWhenDone: a coverage check that holds answers false once its
// space's done channel is closed, and true while it is open or absent.
func TestDimCoveredStopsWhenDone(t *testing.T) {
	m, err := sharding.ParseMeshString("x=65521", "mesh")
	require.NoError(t, err)
	src, err := sharding.Parse(json.RawMessage(`[["x"]]`), m, []int64{200000}, "source")
	require.NoError(t, err)
	closed := make(chan struct{})
	close(closed)
	open := make(chan struct{})
	for _, tc := range []struct {
		name string
		done <-chan struct{}
		want bool
	}{
		{"unwatched", nil, true},
		{"open", open, true},
		{"closed", closed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, ok := newSpace(m, []int64{200000}, 32, src)
			require.True(t, ok)
			sp.done = tc.done
			x := sp.stateOf(src)[0]
			// A gather of x: every device's whole dim is the union of x's shards.
			assert.Equal(t, tc.want, sp.dimCovered(0, x, nil, maskOf(x)))
		})
	}
}
