package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// corpusRecord is one plan of the pricing corpus, as TestPricingCorpus writes it to
// $SHARDPLAN_CORPUS_OUT (JSON lines) for BENCHMARKS.md.
type corpusRecord struct {
	Name        string   `json:"name"`
	Profile     string   `json:"profile"`
	Ops         []string `json:"ops"`
	TimeUS      float64  `json:"time_us"`
	BoundUS     float64  `json:"time_lower_bound_us"`
	Bytes       int64    `json:"bytes_per_device"`
	BoundBytes  int64    `json:"lower_bound_bytes_per_device"`
	Expansions  int      `json:"search_expansions"`
	UsesA2AV    bool     `json:"uses_all_to_all_v"`
	Permutes    int      `json:"collective_permutes"`
	Collectives int      `json:"collectives"`
}

// TestPricingCorpus plans testdata/pricing_corpus.json (the planner corpus, its
// hand-picked cases, 2-node H100 meshes and 50 seeded random reshards up to 4,096 devices) on
// tpu-v5p and h100: every plan replays and is priced at or above the time lower bound
// of the data it moves. It logs, per profile, how many plans use all_to_all_v and the
// median and worst time efficiency.
func TestPricingCorpus(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	raw, err := os.ReadFile("testdata/pricing_corpus.json")
	require.NoError(t, err)
	var cases []corpusCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	var out *json.Encoder
	if path := os.Getenv("SHARDPLAN_CORPUS_OUT"); path != "" {
		f, err := os.Create(path)
		require.NoError(t, err)
		defer f.Close()
		out = json.NewEncoder(f)
	}
	for _, profile := range []string{"tpu-v5p", "h100"} {
		model, _ := cost.Profile(profile)
		var effs []float64
		a2av, pure, comm := 0, 0, 0
		for _, c := range cases {
			m := mustMesh(t, c.Mesh)
			r := &Request{Mesh: m, Shape: c.Shape, ElemBits: 16, Source: mustSharding(t, m, c.Shape, string(c.Source)), Target: mustSharding(t, m, c.Shape, string(c.Target)), Model: model}
			p, err := Reshard(context.Background(), r)
			require.NoError(t, err, c.Name)
			if m.NumDevices() <= 256 {
				replay(t, p)
			}
			s := p.Summary
			name := fmt.Sprintf("%s on %s: %s", c.Name, profile, describe(p))
			assert.GreaterOrEqual(t, s.TimeUS*(1+1e-9), s.TimeLowerBoundUS, name)
			assert.LessOrEqual(t, s.TimeEfficiency, 1+1e-9, name)
			rec := corpusRecord{Name: c.Name, Profile: profile, TimeUS: s.TimeUS, BoundUS: s.TimeLowerBoundUS, Bytes: s.BytesPerDevice, BoundBytes: s.LowerBoundBytesPerDevice, Expansions: s.SearchExpansions, Collectives: s.Collectives}
			for _, o := range ops(p) {
				rec.Ops = append(rec.Ops, string(o))
				rec.UsesA2AV = rec.UsesA2AV || o == OpAllToAllV
				if o == OpCollectivePermute {
					rec.Permutes++
				}
			}
			if out != nil {
				require.NoError(t, out.Encode(rec))
			}
			if s.Collectives > 0 {
				comm++
				effs = append(effs, s.TimeEfficiency)
				if rec.UsesA2AV {
					a2av++
				}
				if len(p.Steps) == 1 && p.Steps[0].Op == OpAllToAllV {
					pure++
				}
			}
		}
		slices.Sort(effs)
		t.Logf("%s: %d cases, %d communicate, %d use all_to_all_v (%d as the whole plan); time efficiency worst %.3f, median %.3f", profile, len(cases), comm, a2av, pure, effs[0], effs[len(effs)/2])
		if profile == "tpu-v5p" {
			// On a torus the structured collectives win where they apply; on a GPU
			// fabric, where every collective pays NCCL's base latency, one grouped
			// send/recv often is the fastest answer for small or irregular moves. A
			// hybrid plan may end or start with an exchange beside the
			// structured steps; the exchange alone as the plan stays the exception.
			assert.Less(t, pure, comm/4, "%s: the exchange alone is the exception, not the rule", profile)
			assert.Less(t, a2av, comm/2, "%s: most plans have no exchange at all", profile)
		}
	}
}

// TestXLAFallbacksSuggestOrExplain: under strategy xla, every reshard of the pricing
// corpus that takes XLA's fallback either gets suggested constraints whose hops XLA
// handles (checkXLA replays them) or a note saying why there are none; and most get
// suggestions (at least 7 in 8).
func TestXLAFallbacksSuggestOrExplain(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	raw, err := os.ReadFile("testdata/pricing_corpus.json")
	require.NoError(t, err)
	var cases []corpusCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	model, _ := cost.Profile("tpu-v5p")
	fallbacks, suggested := 0, 0
	for _, c := range cases {
		m := mustMesh(t, c.Mesh)
		if m.NumDevices() > 256 {
			continue
		}
		r := &Request{Mesh: m, Shape: c.Shape, ElemBits: 16, Source: mustSharding(t, m, c.Shape, string(c.Source)), Target: mustSharding(t, m, c.Shape, string(c.Target)), Model: model}
		p, info, err := ReshardXLA(context.Background(), r)
		require.NoError(t, err, c.Name)
		if !info.Fallback && !p.Summary.FullRematerialization {
			continue
		}
		fallbacks++
		checkXLA(t, p, info)
		if len(info.Suggested) > 0 {
			suggested++
			assert.Empty(t, info.SuggestionNote, c.Name)
		} else {
			assert.NotEmpty(t, info.SuggestionNote, "%s: no suggestion and no reason", c.Name)
		}
	}
	t.Logf("%d fallbacks, %d with suggestions", fallbacks, suggested)
	require.Positive(t, fallbacks)
	assert.GreaterOrEqual(t, suggested*8, fallbacks*7, "at least 7 in 8 fallbacks get a suggestion")
}
