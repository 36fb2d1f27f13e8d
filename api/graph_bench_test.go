package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardplan/shardplan/internal/testgen"
	"github.com/stretchr/testify/require"
)

func TestTransformerGraphEndpoint(t *testing.T) {
	s := newTestServer(t, nil)
	g := postGraph(t, s, testgen.TransformerGraphJSON(2))
	// Per layer: the attention output and the second MLP matmul contract over model.
	reductions := 0
	for _, c := range g.Collectives {
		if c.Kind == kindReduction {
			reductions++
		}
	}
	require.GreaterOrEqual(t, reductions, 4, "%+v", g.Summary)
	require.Less(t, g.Summary.UniquePlans, len(g.Collectives), "the second layer reuses the first layer's plans")
	require.Equal(t, []string{"data"}, g.Shardings["l1.out"].Dims[0].Axes)
}

// BenchmarkGraph measures POST /v1/graph end to end (decode, propagate, plan every
// distinct reshard and reduction, encode) without a cache, up to 100k ops (the request
// timeout is raised so a loaded machine measures rather than times out).
func BenchmarkGraph(b *testing.B) {
	benchmarkGraph(b, []int{48, 476, 4761}, "")
}

// BenchmarkGraphPolicy is BenchmarkGraph with policy.forbid_full_rematerialization (the
// transformer breaks no policy, so the answer is the same 200): the policy check's cost
// on a miss.
func BenchmarkGraphPolicy(b *testing.B) {
	benchmarkGraph(b, []int{48, 476}, `"policy":{"forbid_full_rematerialization":true},`)
}

// benchmarkGraph posts the transformer graph of each number of layers, with extra
// members (`"name":value,`) first in the body.
func benchmarkGraph(b *testing.B, layers []int, extra string) {
	lim := DefaultLimits()
	lim.RequestTimeout = 5 * time.Minute
	s, err := New(Deps{Limits: lim})
	require.NoError(b, err)
	for _, l := range layers {
		body := testgen.TransformerGraphJSON(l)
		body = "{" + extra + strings.TrimPrefix(body, "{")
		b.Run(fmt.Sprintf("ops=%d", l*21), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/graph", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, r)
				if rec.Code != http.StatusOK {
					b.Fatalf("%d: %.300s", rec.Code, rec.Body.String())
				}
			}
		})
	}
}
