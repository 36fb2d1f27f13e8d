package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestHumanGolden keeps what the CLI prints for the examples (a plan, a policy violation
// with its plan, graphs, tiles) as golden files, refreshed with
// go test ./cmd/shardplan -run TestHumanGolden -update. Each warning and each fix is
// printed once, and a count agrees with its noun.
func TestHumanGolden(t *testing.T) {
	cases := []struct {
		golden string
		args   []string
		code   int
		stdin  string
	}{
		{"reshard-xla-pairs.txt", []string{"reshard", example("reshard-seed003-case1-xla-pairs.json")}, exitOK, ""},
		{"reshard-cheaper-than-xla.txt", []string{"reshard", example("reshard-seed003-case1.json")}, exitOK, ""},
		{"reshard-allow-remat.txt", []string{"reshard", example("reshard-allow-remat.json")}, exitOK, ""},
		{"reshard-violation.txt", []string{"reshard", example("ci-gate-xla-case4.json")}, exitViolation, ""},
		{"graph-mlp.txt", []string{"graph", example("graph-mlp.json")}, exitOK, ""},
		{"graph-module.txt", []string{"graph", example("graph-stablehlo-mlp.mlir")}, exitOK, ""},
		{"graph-violation.txt", []string{"graph", example("graph-ci-gate.json")}, exitViolation, ""},
		{"tiles.txt", []string{"tiles", example("tiles-16x23.json")}, exitOK, ""},
		{"reshard-fallback-in-groups.txt", []string{"reshard", "-"}, exitOK, `{"mesh": "w=2,p=2,q=2,r=2", "shape": [4, 8, 8, 8], "dtype": "f32",
			"source": ["w", "p", null, ["q", "r"]], "target": ["w", null, ["p", "q", "r"], null], "strategy": "xla"}`},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			r := runCLI(t, nil, tc.stdin, tc.args...)
			require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, once := range []string{"[SPMD] Involuntary full rematerialization", "fix: insert these sharding constraints"} {
				assert.LessOrEqual(t, strings.Count(r.stdout, once), 1, "printed more than once: %q", once)
			}
			for _, bad := range []string{" 1 collectives", " 1 steps", " 1 sites", " 1 tensors", "(s)", "within device groups)\n"} {
				assert.NotContains(t, r.stdout, bad)
			}
			if strings.Contains(r.stdout, "full rematerialization: YES") {
				assert.NotContains(t, r.stdout, "last resort within device groups", "a full remat is not a fallback within groups")
			}
			if strings.Contains(r.stdout, "full rematerialization: no") {
				assert.NotContains(t, r.stdout, "every device gathers the whole tensor", "no full remat, yet the line says every device")
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(path, []byte(r.stdout), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), r.stdout)
		})
	}
}

// TestHumanXLAAndOptimality: a reshard's summary gives XLA's price beside the plan (or
// says XLA already does this) and explains its optimality against the bound; a plan of
// strategy xla has no XLA line.
func TestHumanXLAAndOptimality(t *testing.T) {
	cases := []struct {
		name, stdin string
		want        []string
		absent      []string
	}{
		{"cheaper than XLA", `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "cost_model": "tpu-v5p"}`,
			[]string{"\nXLA (strategy xla): 26.30 us; this plan 24.30 us, 1.08x faster\n",
				"\noptimality: proven optimal under the allowed ops; the bound (12.65 us, 52% of the plan's time) counts any schedule, so a gap does not mean a cheaper plan exists\n"},
			[]string{"XLA already"}},
		{"equal to XLA", `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "cost_model": "tpu-v5p", "allowed_ops": ["slice", "all_gather", "all_to_all", "collective_permute"]}`,
			[]string{"\nXLA already does this (same steps, 26.30 us)\n", "\noptimality: proven optimal under the allowed ops; the bound (12.65 us, 48% of the plan's time)"},
			[]string{"XLA (strategy xla)"}},
		{"strategy xla", `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "cost_model": "tpu-v5p", "strategy": "xla"}`,
			[]string{"strategy xla, cost model tpu-v5p"},
			[]string{"XLA (strategy xla)", "XLA already", "optimality:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, tc.stdin, "reshard", "-")
			require.Equal(t, exitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, w := range tc.want {
				assert.Contains(t, r.stdout, w)
			}
			for _, bad := range tc.absent {
				assert.NotContains(t, r.stdout, bad)
			}
		})
	}
}

// TestFallbackLine: the line under a summary agrees with its full rematerialization flag.
func TestFallbackLine(t *testing.T) {
	cases := []struct {
		name           string
		fallback, full bool
		want           string
	}{
		{"no fallback", false, false, ""},
		{"no fallback, a remat the plan chose", false, true, ""},
		{"fallback over every device", true, true, "every device gathers the whole tensor"},
		{"fallback within groups", true, false, "within device groups"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := fallbackLine(tc.fallback, tc.full)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
}
