package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestXLALine: XLA's price beside the plan, "already does this" when XLA's plan is the
// chosen one or has its steps and time, and nothing without an XLA candidate.
func TestXLALine(t *testing.T) {
	cands := func(xla Candidate, chosen Candidate) []Candidate {
		xla.Name, chosen.Chosen = "xla", true
		if chosen.Name == "" {
			chosen.Name = "complete"
		}
		return []Candidate{chosen, xla}
	}
	cases := []struct {
		name string
		s    SummaryJSON
		want string
	}{
		{"no candidates (strategy xla)", SummaryJSON{Strategy: "xla", TimeUS: 26.3}, ""},
		{"no xla candidate", SummaryJSON{TimeUS: 5, Candidates: []Candidate{{Name: "greedy", Steps: 1, TimeUS: 5, Chosen: true}}}, ""},
		{"cheaper than XLA", SummaryJSON{TimeUS: 24.3, Candidates: cands(Candidate{Steps: 2, TimeUS: 142.3}, Candidate{Steps: 1, TimeUS: 24.3})},
			"XLA (strategy xla): 142.30 us; this plan 24.30 us, 5.86x faster"},
		{"xla chosen", SummaryJSON{TimeUS: 26.3, Candidates: []Candidate{{Name: "xla", Steps: 2, TimeUS: 26.3, Chosen: true}}},
			"XLA already does this (same steps, 26.30 us)"},
		{"same steps and time", SummaryJSON{TimeUS: 26.3, Candidates: cands(Candidate{Steps: 2, TimeUS: 26.3}, Candidate{Steps: 2, TimeUS: 26.3})},
			"XLA already does this (same steps, 26.30 us)"},
		{"same time, other steps", SummaryJSON{TimeUS: 26.3, Candidates: cands(Candidate{Steps: 3, TimeUS: 26.3}, Candidate{Steps: 2, TimeUS: 26.3})},
			"XLA (strategy xla): 26.30 us; this plan 26.30 us, the same time in other steps"},
		{"under 1% cheaper", SummaryJSON{TimeUS: 11.0014, Candidates: cands(Candidate{Steps: 2, TimeUS: 11.0022}, Candidate{Steps: 3, TimeUS: 11.0014})},
			"XLA (strategy xla): 11.00 us; this plan 11.00 us, 0.0008 us less, under 1%"},
		{"XLA cheaper (outside the rules)", SummaryJSON{TimeUS: 40, Candidates: cands(Candidate{Steps: 2, TimeUS: 20}, Candidate{Steps: 3, TimeUS: 40})},
			"XLA (strategy xla): 20.00 us; this plan 40.00 us, 2.00x slower (XLA's plan is outside this request's rules, or the search's budget ended)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, XLALine(tc.s))
		})
	}
}

// TestOptimalityLine: "proven" is explained against the bound, which counts any schedule;
// best_found gives its gap; a plan at the bound says so.
func TestOptimalityLine(t *testing.T) {
	cases := []struct {
		name string
		s    SummaryJSON
		want string
	}{
		{"no certificate", SummaryJSON{Strategy: "xla", TimeUS: 10, TimeLowerBoundUS: 5}, ""},
		{"proven above the bound", SummaryJSON{Optimality: "proven", TimeUS: 36.3, TimeLowerBoundUS: 24.3},
			"optimality: proven optimal under the allowed ops; the bound (24.30 us, 67% of the plan's time) counts any schedule, so a gap does not mean a cheaper plan exists"},
		{"proven at the bound", SummaryJSON{Optimality: "proven", TimeUS: 6.73, TimeLowerBoundUS: 6.73},
			"optimality: proven optimal under the allowed ops, and the plan meets the time bound (6.73 us), which counts any schedule"},
		{"proven without a bound", SummaryJSON{Optimality: "proven", TimeUS: 6.73},
			"optimality: proven optimal under the allowed ops (no plan of these ops is cheaper on this cost model)"},
		{"best found with a gap", SummaryJSON{Optimality: "best_found", TimeUS: 12.64, TimeLowerBoundUS: 9.46, OptimalityGapUS: 3.18},
			"optimality: best found (the search's budget ended); 3.18 us above the bound (9.46 us, 75% of the plan's time), which counts any schedule; a cheaper plan of these ops may exist"},
		{"best found at the bound", SummaryJSON{Optimality: "best_found", TimeUS: 6.73, TimeLowerBoundUS: 6.73},
			"optimality: best found (the search's budget ended), yet the plan meets the time bound (6.73 us), which counts any schedule: none is cheaper"},
		{"best found without a bound", SummaryJSON{Optimality: "best_found", TimeUS: 6.73},
			"optimality: best found (the search's budget ended)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, OptimalityLine(tc.s))
		})
	}
}

// TestReshardTextXLAAndOptimality: the text/plain answer of a reshard ends with the
// plan's totals, XLA's price beside it (from the JSON answer's xla candidate) and the
// optimality explained; a request with strategy xla has no XLA line.
func TestReshardTextXLAAndOptimality(t *testing.T) {
	s := newTestServer(t, nil)
	const base = `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "cost_model": "tpu-v5p"`
	cases := []struct {
		name, body string
		want       []string // lines of the text answer, each matched by its prefix
		absent     []string
	}{
		{"cheaper than XLA", base + `}`,
			[]string{"total: 1 collective, ", "XLA (strategy xla): ", "optimality: proven optimal under the allowed ops; the bound ("}, []string{"XLA already"}},
		{"equal to XLA", base + `, "allowed_ops": ["slice", "all_gather", "all_to_all", "collective_permute"]}`,
			[]string{"total: 1 collective, ", "XLA already does this (same steps, ", "optimality: proven optimal under the allowed ops; "}, []string{"XLA (strategy xla)"}},
		{"strategy xla", base + `, "strategy": "xla"}`,
			[]string{"total: 1 collective, "}, []string{"XLA (strategy xla)", "XLA already", "optimality:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jrec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", tc.body)
			require.Equal(t, http.StatusOK, jrec.Code, jrec.Body.String())
			var r ReshardResponse
			require.NoError(t, json.Unmarshal(jrec.Body.Bytes(), &r))
			rec := doAccept(t, s, "/v1/reshard", "application/json", "text/plain", tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			text := rec.Body.String()
			require.True(t, strings.HasPrefix(text, "Reshard 2048x2048 tensor"), text)
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			tail := lines[len(lines)-len(tc.want):]
			for i, prefix := range tc.want {
				assert.True(t, strings.HasPrefix(tail[i], prefix), "line %q, want prefix %q:\n%s", tail[i], prefix, text)
			}
			// The lines agree with the JSON answer of the same request.
			for _, line := range []string{XLALine(r.Summary), OptimalityLine(r.Summary)} {
				if line != "" {
					assert.Contains(t, text, line+"\n")
				}
			}
			for _, bad := range tc.absent {
				assert.NotContains(t, text, bad)
			}
			// The JSON diagram member stays the pictures alone.
			drec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", strings.TrimSuffix(tc.body, "}")+`, "include": ["diagram"]}`)
			require.Equal(t, http.StatusOK, drec.Code, drec.Body.String())
			var d ReshardResponse
			require.NoError(t, json.Unmarshal(drec.Body.Bytes(), &d))
			assert.True(t, strings.HasPrefix(text, d.Diagram), "the text answer starts with the diagram")
			assert.NotContains(t, d.Diagram, "total:")
			if tc.name == "cheaper than XLA" {
				var xla float64
				for _, c := range r.Summary.Candidates {
					if c.Name == "xla" {
						xla = c.TimeUS
					}
				}
				require.Greater(t, xla, r.Summary.TimeUS, "the example must be cheaper than XLA")
				assert.Contains(t, text, "x faster\n")
			}
		})
	}
}
