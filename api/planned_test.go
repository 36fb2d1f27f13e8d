package api

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapMemo is a Memo over a map, whose entries a test can set and read.
type mapMemo struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (mm *mapMemo) Do(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	mm.mu.Lock()
	b, ok := mm.m[key]
	mm.mu.Unlock()
	if ok {
		return b, true, nil
	}
	b, err := compute(ctx)
	if err != nil {
		return nil, false, err
	}
	mm.mu.Lock()
	mm.m[key] = b
	mm.mu.Unlock()
	return b, false, nil
}

// TestAnswerPlannedVerdicts checks where the policy check and the text answer take their
// verdict from: the fresh answer on a miss, the memoized verdict on a hit when it
// describes the memoized bytes, and the bytes themselves (read once, then memoized)
// otherwise.
func TestAnswerPlannedVerdicts(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	body := []byte(`{"plan_id":"p","summary":{}}`)
	violating := func(from string) *verdict {
		return &verdict{Violated: true, Detail: from, Violations: []Violation{{Policy: "forbid_full_rematerialization", Message: from}}, Diagram: from}
	}
	stored := func(v *verdict) []byte {
		b, err := encodeJSON(v)
		require.NoError(t, err)
		return b
	}
	vkey := verdictKey(key, body)
	forbid := &Policy{ForbidFullRematerialization: true}
	tests := []struct {
		name      string
		memo      map[string][]byte // entries before the request
		policy    *Policy
		text      bool
		clean     bool   // the plan breaks no policy
		want      string // the detail of the 422, or the 200 body
		wantPlans int
		wantReads int
		wantHit   bool
		garbled   bool // the memoized verdict does not decode: every request reads the body
	}{
		{name: "miss: the fresh verdict", policy: forbid, want: "fresh", wantPlans: 1},
		{name: "miss, no policy: the body", want: string(body), wantPlans: 1},
		{name: "miss, policy false: the body", policy: &Policy{}, want: string(body), wantPlans: 1},
		{name: "miss, clean plan: the body", policy: forbid, clean: true, want: string(body), wantPlans: 1},
		{name: "miss, text: the fresh diagram", text: true, want: "fresh", wantPlans: 1},
		{name: "hit without a verdict: read from the bytes", memo: map[string][]byte{key: body}, policy: forbid, want: "read", wantReads: 1, wantHit: true},
		{name: "hit with a verdict", memo: map[string][]byte{key: body, vkey: stored(violating("stored"))},
			policy: forbid, want: "stored", wantHit: true},
		{name: "hit with a clean verdict", memo: map[string][]byte{key: body, vkey: stored(&verdict{})},
			policy: forbid, want: string(body), wantHit: true},
		{name: "hit with a verdict, text", memo: map[string][]byte{key: body, vkey: stored(violating("stored"))},
			text: true, want: "stored", wantHit: true},
		{name: "hit with a verdict of other bytes only", memo: map[string][]byte{key: body, verdictKey(key, []byte(`{}`)): stored(violating("stale"))},
			policy: forbid, want: "read", wantReads: 1, wantHit: true},
		{name: "hit with a garbled verdict", memo: map[string][]byte{key: body, vkey: []byte(`not json`)},
			policy: forbid, want: "read", wantReads: 1, wantHit: true, garbled: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mm := &mapMemo{m: map[string][]byte{}}
			for k, v := range tc.memo {
				mm.m[k] = v
			}
			s := newTestServer(t, func(d *Deps) { d.Memo = mm })
			plans, reads := 0, 0
			plan := func(context.Context) (*planned, error) {
				plans++
				return &planned{body: body, verdict: func() (*verdict, error) {
					if tc.clean {
						return &verdict{}, nil
					}
					return violating("fresh"), nil
				}}, nil
			}
			read := func(b []byte) (*verdict, error) {
				reads++
				assert.Equal(t, body, b)
				return violating("read"), nil
			}
			out, hit, err := s.answerPlanned(t.Context(), key, tc.policy, tc.text, plan, read, nil)
			if p, ok := err.(*Problem); ok {
				assert.Equal(t, http.StatusUnprocessableEntity, p.Status)
				assert.Equal(t, tc.want, p.Detail)
				assert.Equal(t, json.RawMessage(body), p.Extensions["plan"])
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(out))
			}
			assert.Equal(t, tc.wantHit, hit)
			assert.Equal(t, tc.wantPlans, plans, "plans")
			assert.Equal(t, tc.wantReads, reads, "reads of the bytes")

			// A verdict that was needed is memoized, sealed to the body: the same request
			// again reads nothing.
			switch {
			case tc.garbled:
				_, _, _ = s.answerPlanned(t.Context(), key, tc.policy, tc.text, plan, read, nil)
				assert.Equal(t, 2*tc.wantReads, reads, "reads of the bytes, again")
			case tc.policy.forbidsRemat() || tc.text:
				var v verdict
				require.NoError(t, json.Unmarshal(mm.m[vkey], &v))
				_, _, _ = s.answerPlanned(t.Context(), key, tc.policy, tc.text, plan, read, nil)
				assert.Equal(t, tc.wantReads, reads, "reads of the bytes, again")
			default:
				assert.NotContains(t, mm.m, vkey, "no verdict kept when none is asked for")
			}
		})
	}
}

// TestVerdictFromValueMatchesBytes checks the two ways to a verdict agree: from the
// rendered answer (a miss) and read back from its bytes (a plan memoized without one).
func TestVerdictFromValueMatchesBytes(t *testing.T) {
	s := newTestServer(t, nil)
	tests := []struct {
		file     string
		violated bool
	}{
		{"ci-gate-xla-case4.json", true},
		{"ci-gate-xla-case4-hop1.json", false},
		{"reshard-seed003-case1.json", false},
		{"reshard-partial-sums.json", false},
		{"graph-ci-gate.json", true},
		{"graph-api-example.json", false},
		{"graph-mlp.json", false},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "examples", tc.file))
			require.NoError(t, err)
			var fromValue func() (*verdict, error)
			var answer any
			var read func([]byte) (*verdict, error)
			if filepath.Base(tc.file)[:5] == "graph" {
				in, err := s.prepareGraph(raw, nil)
				require.NoError(t, err)
				resp, err := s.planGraph(t.Context(), in)
				require.NoError(t, err)
				answer, fromValue, read = resp, resp.verdict, readGraphVerdict
			} else {
				in := &reshardInput{include: map[string]bool{}}
				require.NoError(t, decodeBytes(raw, &in.req))
				in.req.Include = append(in.req.Include, "diagram")
				require.NoError(t, s.prepareReshard(in))
				resp, err := s.planReshard(t.Context(), in)
				require.NoError(t, err)
				require.NotEmpty(t, resp.Diagram)
				answer, fromValue, read = resp, resp.verdict, readReshardVerdict
			}
			p, err := encodePlanned(answer, fromValue)
			require.NoError(t, err)
			got, err := p.verdict()
			require.NoError(t, err)
			want, err := read(p.body)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, tc.violated, got.Violated)
			if tc.violated {
				assert.NotEmpty(t, got.Violations)
			}
		})
	}
}
