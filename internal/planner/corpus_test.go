package planner

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type corpusCase struct {
	Name   string          `json:"name"`
	Mesh   string          `json:"mesh"`
	Shape  []int64         `json:"shape"`
	Source json.RawMessage `json:"source"`
	Target json.RawMessage `json:"target"`
}

// TestCorpusQuality plans every case of testdata/corpus.json, replays it, and reports
// the worst, p10 and median efficiency (lower bound / bytes).
func TestCorpusQuality(t *testing.T) {
	raw, err := os.ReadFile("testdata/corpus.json")
	require.NoError(t, err)
	var cases []corpusCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	var effs []float64
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			m := mustMesh(t, c.Mesh)
			r := &Request{Mesh: m, Shape: c.Shape, ElemBits: 32, Source: mustSharding(t, m, c.Shape, string(c.Source)), Target: mustSharding(t, m, c.Shape, string(c.Target)), Model: testModel{}}
			p, err := Reshard(context.Background(), r)
			require.NoError(t, err)
			replay(t, p)
			assert.False(t, p.Summary.FullRematerialization)
			t.Logf("efficiency %.3f bytes %d bound %d steps %v", p.Summary.Efficiency, p.Summary.BytesPerDevice, p.Summary.LowerBoundBytesPerDevice, ops(p))
			effs = append(effs, p.Summary.Efficiency)
		})
	}
	slices.Sort(effs)
	median := effs[len(effs)/2]
	p10 := effs[(len(effs)*10+99)/100-1] // nearest rank
	t.Logf("corpus: %d cases, worst %.3f, p10 %.3f, median %.3f", len(effs), effs[0], p10, median)
	// The planner minimizes time, not bytes: under testModel a gather then a local slice
	// (one collective) beats a permute then a gather that move fewer bytes, so some plans
	// move two or three times the bound. These floors guard against plans that move
	// more still.
	assert.GreaterOrEqual(t, median, 1.0, "median efficiency")
	assert.GreaterOrEqual(t, p10, 0.4, "p10 efficiency")
	assert.GreaterOrEqual(t, effs[0], 0.3, "worst efficiency")
}
