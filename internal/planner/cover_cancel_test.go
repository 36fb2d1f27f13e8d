package planner

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestCancelMidCoverageCheck: a request cancelled while a coverage check enumerates
// answers the context's error, and its checks stop at their next look at the done
// channel: the context is cancelled from a check's first look mid-enumeration; after
// it, a check that was enumerating on another of the request's goroutines (the exact
// pass, the side work) may report the coordinates it had reached at its next look, once,
// and every later look comes before a first coordinate.
func TestCancelMidCoverageCheck(t *testing.T) {
	for _, h := range unevenHogs {
		t.Run(h.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			var atCancel, total int64 = -1, 0
			var after []int64
			coverPolled = func(visited, n int64) {
				mu.Lock()
				defer mu.Unlock()
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
			mu.Lock()
			defer mu.Unlock()
			require.ErrorIs(t, err, context.Canceled)
			require.GreaterOrEqual(t, atCancel, int64(0), "no coverage check enumerated: the input does not exercise dimCovered")
			assert.Less(t, atCancel, total, "cancelled after the check's first pass finished")
			going := 0 // looks of checks that were enumerating when the context ended
			for _, v := range after {
				if v > 0 {
					going++
				}
			}
			assert.LessOrEqual(t, going, maxConcurrentChecks, "coverage checks went on enumerating after their request was cancelled: %v", after)
		})
	}
}

// maxConcurrentChecks is how many of one request's goroutines may run a coverage check
// at once: the search, its exact pass and the side work.
const maxConcurrentChecks = 3

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
