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
// verdict from: the fresh answer on a miss, the verdict stored in the entry on a hit, and
// the bytes themselves (read on every hit) when the entry holds an answer alone or a
// verdict that does not read.
func TestAnswerPlannedVerdicts(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	body := []byte(`{"plan_id":"p","summary":{}}`)
	violating := func(from string) *verdict {
		return &verdict{Violated: true, Detail: from, Violations: []Violation{{Policy: "forbid_full_rematerialization", Message: from}}, Diagram: from}
	}
	entry := func(v *verdict) []byte {
		b, err := newPlanEntry(v, body)
		require.NoError(t, err)
		return b
	}
	garbled := append([]byte(planEntryMagic+"8\nnot json"), body...)
	forbid := &Policy{ForbidFullRematerialization: true}
	tests := []struct {
		name      string
		stored    []byte // the entry under key before the request, if any
		policy    *Policy
		text      bool
		clean     bool   // the plan breaks no policy
		want      string // the detail of the 422, or the 200 body
		wantPlans int
		wantReads int
		wantHit   bool
	}{
		{name: "miss: the fresh verdict", policy: forbid, want: "fresh", wantPlans: 1},
		{name: "miss, no policy: the body", want: string(body), wantPlans: 1},
		{name: "miss, policy false: the body", policy: &Policy{}, want: string(body), wantPlans: 1},
		{name: "miss, clean plan: the body", policy: forbid, clean: true, want: string(body), wantPlans: 1},
		{name: "miss, text: the fresh diagram", text: true, want: "fresh", wantPlans: 1},
		{name: "hit without a verdict: read from the bytes", stored: body, policy: forbid, want: "read", wantReads: 1, wantHit: true},
		{name: "hit without a verdict, no policy: the body, nothing read", stored: body, want: string(body), wantHit: true},
		{name: "hit with a verdict", stored: entry(violating("stored")), policy: forbid, want: "stored", wantHit: true},
		{name: "hit with a clean verdict", stored: entry(&verdict{}), policy: forbid, want: string(body), wantHit: true},
		{name: "hit with a verdict, text", stored: entry(violating("stored")), text: true, want: "stored", wantHit: true},
		{name: "hit with a verdict, no policy: the body", stored: entry(violating("stored")), want: string(body), wantHit: true},
		{name: "hit with a garbled verdict", stored: garbled, policy: forbid, want: "read", wantReads: 1, wantHit: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mm := &mapMemo{m: map[string][]byte{}}
			if tc.stored != nil {
				mm.m[key] = tc.stored
			}
			s := newTestServer(t, func(d *Deps) { d.Memo = mm })
			plans, reads := 0, 0
			plan := func(context.Context) ([]byte, *verdict, error) {
				plans++
				if tc.clean {
					return body, &verdict{}, nil
				}
				return body, violating("fresh"), nil
			}
			read := func(b []byte) (*verdict, error) {
				reads++
				assert.Equal(t, body, b)
				return violating("read"), nil
			}
			answer := func() (*answer, error) {
				return s.answerPlanned(t.Context(), key, tc.policy, tc.text, plan, read)
			}
			a, err := answer()
			if p, ok := err.(*Problem); ok {
				assert.Equal(t, http.StatusUnprocessableEntity, p.Status)
				assert.Equal(t, tc.want, p.Detail)
				assert.Equal(t, json.RawMessage(body), p.Plan)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(a.body))
				assert.Equal(t, tc.wantHit, a.hit)
				if tc.text {
					assert.Empty(t, a.planID, "a diagram is no plan entry's body")
				} else {
					assert.Equal(t, key, a.planID, "the plan id of the entry the answer is")
				}
			}
			assert.Equal(t, tc.wantPlans, plans, "plans")
			assert.Equal(t, tc.wantReads, reads, "reads of the bytes")

			// The entry holds the answer and, when this request planned it, its verdict:
			// the same request again plans nothing and reads nothing more.
			got, v := openPlanEntry(mm.m[key])
			assert.Equal(t, string(body), string(got), "the entry's answer")
			if tc.wantPlans > 0 {
				require.NotNil(t, v, "a planned entry keeps its verdict")
			}
			_, _ = answer()
			assert.Equal(t, tc.wantPlans, plans, "plans, again")
			assert.Equal(t, 2*tc.wantReads, reads, "reads of the bytes, again (only entries without a verdict)")
		})
	}
}

// TestPlanEntryRoundTrip: an entry opens to the answer and verdict it was made of; what
// is not an entry opens to itself without a verdict.
func TestPlanEntryRoundTrip(t *testing.T) {
	body := []byte(`{"plan_id":"p","diagram":"x\ny"}`)
	v := &verdict{Violated: true, Detail: "d", Diagram: "x\ny"}
	e, err := newPlanEntry(v, body)
	require.NoError(t, err)
	gotBody, gotV := openPlanEntry(e)
	assert.Equal(t, body, gotBody)
	assert.Equal(t, v, gotV)
	for _, raw := range [][]byte{body, []byte(planEntryMagic), []byte(planEntryMagic + "99\n{}"), []byte(planEntryMagic + "-1\n{}")} {
		got, v := openPlanEntry(raw)
		assert.Equal(t, raw, got)
		assert.Nil(t, v)
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
			var body []byte
			var read func([]byte) (*verdict, error)
			if filepath.Base(tc.file)[:5] == "graph" {
				in, err := prepareGraphKeyed(s, raw)
				require.NoError(t, err)
				resp, err := s.planGraph(t.Context(), in)
				require.NoError(t, err)
				body, err = encodeJSON(resp)
				require.NoError(t, err)
				fromValue, read = resp.verdict, readGraphVerdict
			} else {
				in := &reshardInput{include: map[string]bool{}}
				require.NoError(t, decodeBytes(raw, &in.req))
				in.req.Include = append(in.req.Include, "diagram")
				require.NoError(t, s.prepareReshard(in))
				resp, err := s.planReshard(t.Context(), in)
				require.NoError(t, err)
				require.NotEmpty(t, resp.Diagram)
				body, err = encodeReshardJSON(resp)
				require.NoError(t, err)
				fromValue, read = resp.verdict, readReshardVerdict
			}
			got, err := fromValue()
			require.NoError(t, err)
			want, err := read(body)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, tc.violated, got.Violated)
			if tc.violated {
				assert.NotEmpty(t, got.Violations)
			}
		})
	}
}
