package transfer

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestCandidatesArePriced: every candidate is a priced plan (no time 0 when bytes
// move); chain and tree with one replica are excluded with their reason, never listed.
func TestCandidatesArePriced(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 39))
	ones := 0
	for i := range 60 {
		p := randomProblem(t, rng, 4, 64)
		res, err := Plan(context.Background(), p)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		for _, c := range res.Candidates {
			if res.Bound.TimeUS > 0 && c.TimeUS <= 0 {
				t.Errorf("case %d: candidate %s at %.1f us", i, c.Name, c.TimeUS)
			}
		}
		names := func(yield func(string) bool) {
			for _, c := range res.Candidates {
				if !yield(c.Name) {
					return
				}
			}
		}
		listed := slices.Collect(names)
		if len(p.Targets) == 1 {
			ones++
			for _, s := range []string{"chain", "tree"} {
				if slices.Contains(listed, s) {
					t.Errorf("case %d: %s among the candidates of one replica", i, s)
				}
				k := slices.IndexFunc(res.Excluded, func(e Excluded) bool { return e.Name == s })
				if k < 0 || !strings.Contains(res.Excluded[k].Reason, "two or more target replicas") {
					t.Errorf("case %d: %s not excluded with its reason: %+v", i, s, res.Excluded)
				}
			}
			if !strings.Contains(res.Why, "chain left out") {
				t.Errorf("case %d: why does not say chain is left out: %s", i, res.Why)
			}
		}
	}
	if ones == 0 {
		t.Fatal("no case of one replica")
	}
}

// TestSimplestNearFastest: the chosen plan is within simplerSlack of the fastest
// candidate, and no candidate within it sends fewer messages; when it is not the
// fastest, why says so.
func TestSimplestNearFastest(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 39))
	simpler := 0
	for i := range 80 {
		p := randomProblem(t, rng, 4, 64)
		res, err := Plan(context.Background(), p)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		fastest := res.Candidates[0]
		var chosen Candidate
		for _, c := range res.Candidates {
			if c.FastestUS < fastest.FastestUS {
				fastest = c
			}
			if c.Chosen {
				chosen = c
			}
		}
		if chosen.Name != res.Strategy {
			t.Fatalf("case %d: chosen %q, strategy %q", i, chosen.Name, res.Strategy)
		}
		if chosen.FastestUS > fastest.FastestUS*(1+simplerSlack)+1e-9 {
			t.Errorf("case %d: %s at %.2f us, over %.0f%% above %s's %.2f us", i, chosen.Name, chosen.FastestUS, 100*simplerSlack, fastest.Name, fastest.FastestUS)
		}
		for _, c := range res.Candidates {
			if c.FastestUS <= fastest.FastestUS*(1+simplerSlack) && c.Messages < chosen.Messages {
				t.Errorf("case %d: %s (%d messages) is within %.0f%% of the fastest and simpler than the chosen %s (%d)", i, c.Name, c.Messages, 100*simplerSlack, chosen.Name, chosen.Messages)
			}
		}
		if res.Strategy != res.Fastest {
			simpler++
			if !strings.Contains(res.Why, "simplest plan within 1% of the fastest") {
				t.Errorf("case %d: why does not say the simpler plan won: %s", i, res.Why)
			}
		}
	}
	t.Logf("%d of 80 plans chose a simpler plan than the fastest", simpler)
}

// TestQuantizedReplay: tensors cast to 8 bits with a quarter bit of scales an element,
// before the send or after the receive: the plans still replay (every target device
// ends with its tile), moves carry the moved width, target tiles hold the target's.
func TestQuantizedReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 39))
	for i := range 40 {
		p := randomProblem(t, rng, 4, 64)
		after := i%2 == 1
		for k := range p.Tensors {
			p.Tensors[k].TargetBits, p.Tensors[k].ScaleBits, p.Tensors[k].CastAfter = 8, 0.25, after
		}
		res, err := Plan(context.Background(), p)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := replay(p, res); err != nil {
			t.Fatalf("case %d (after %v): %v", i, after, err)
		}
		for _, c := range res.Classes {
			t0 := &p.Tensors[c.Tensors[0]]
			want := 8.25
			if after {
				want = float64(t0.ElemBits)
			}
			if c.MoveBits != want || c.TargetBits != 8.25 {
				t.Fatalf("case %d: moved %v bits, held %v; want %v and 8.25", i, c.MoveBits, c.TargetBits, want)
			}
			for _, m := range c.Moves {
				n := int64(1)
				for _, r := range m.Ranges {
					n *= r[1] - r[0]
				}
				if got := int64(float64(n)*want/8 + 0.5); m.Bytes != got {
					t.Fatalf("case %d: a move of %d elements carries %d bytes, want %d", i, n, m.Bytes, got)
				}
			}
		}
	}
}
