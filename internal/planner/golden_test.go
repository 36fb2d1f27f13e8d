package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// goldenProfiles are the cost profiles the golden plans are planned on.
var goldenProfiles = []string{"tpu-v5p", "h100"}

// TestGoldenPlans plans every case of testdata/pricing_corpus.json and testgen.RandomSet's
// 250 reshards on tpu-v5p and h100 and compares the chosen plans with the committed
// files under testdata/golden: any change of a plan is a reviewed diff. Each
// line is one case:
//
//	id | op[mesh_axes] -> op[mesh_axes] | time_us | remat=full_rematerialization | optimality
//
// with time_us rounded to 0.01 µs (plans, and so their times, are deterministic). A
// change that moves plans regenerates the files and gives its reason in the commit
// message:
//
//	go test ./internal/planner -run TestGoldenPlans -update
//
// It takes about 5 s without the race detector (2 vCPUs).
func TestGoldenPlans(t *testing.T) {
	t.Parallel() // a sweep of its own requests: it shares nothing the other tests set
	t.Run("pricing_corpus", func(t *testing.T) {
		raw, err := os.ReadFile("testdata/pricing_corpus.json")
		require.NoError(t, err)
		var cases []corpusCase
		require.NoError(t, json.Unmarshal(raw, &cases))
		var lines []string
		for _, profile := range goldenProfiles {
			model, ok := cost.Profile(profile)
			require.True(t, ok, profile)
			for _, c := range cases {
				m := mustMesh(t, c.Mesh)
				r := &Request{Mesh: m, Shape: c.Shape, ElemBits: 16, Source: mustSharding(t, m, c.Shape, string(c.Source)), Target: mustSharding(t, m, c.Shape, string(c.Target)), Model: model}
				p, err := Reshard(context.Background(), r)
				require.NoError(t, err, "%s on %s", c.Name, profile)
				lines = append(lines, goldenLine(profile+"/"+c.Name, p))
			}
		}
		checkGolden(t, "pricing_corpus.txt",
			"the chosen plans of testdata/pricing_corpus.json (ElemBits 16) on tpu-v5p and h100, one per line: profile/name | steps | time_us | remat | optimality",
			lines)
	})
	for _, profile := range goldenProfiles {
		t.Run("randomset-"+profile, func(t *testing.T) {
			model, ok := cost.Profile(profile)
			require.True(t, ok, profile)
			var lines []string
			set := randomSet(t)
			require.False(t, *update && goldenRandomSetCases < len(set), "regenerate the golden plans without -race (it plans a prefix of the set)")
			for i, pb := range set[:min(goldenRandomSetCases, len(set))] {
				r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: model}
				p, err := Reshard(context.Background(), r)
				require.NoError(t, err, "case %d on %s", i, profile)
				lines = append(lines, goldenLine(fmt.Sprintf("%03d", i), p))
			}
			checkGolden(t, "randomset-"+profile+".txt",
				"the chosen plans of testgen.RandomSet's 250 reshards (ElemBits 16) on "+profile+", one per line: case | steps | time_us | remat | optimality",
				lines)
		})
	}
}

// goldenLine is one case's line of a golden file.
func goldenLine(id string, p *Plan) string {
	steps := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		axes := make([]string, len(s.MeshAxes))
		for j, a := range s.MeshAxes {
			axes[j] = a.String()
		}
		steps[i] = string(s.Op) + "[" + strings.Join(axes, ",") + "]"
	}
	if len(steps) == 0 {
		steps = []string{"(none)"}
	}
	s := p.Summary
	return fmt.Sprintf("%s | %s | %.2f | remat=%t | %s", id, strings.Join(steps, " -> "), s.TimeUS, s.FullRematerialization, s.Optimality)
}

// goldenHeaderPrefix starts a golden file's comment lines.
const goldenHeaderPrefix = "# "

// checkGolden compares lines with testdata/golden/name (whose header comment says what
// the file is) and, with -update, rewrites the file first. On a mismatch it fails with
// the first changed cases.
func checkGolden(t *testing.T, name, what string, lines []string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		header := goldenHeaderPrefix + "Golden plans: " + what + ".\n" +
			goldenHeaderPrefix + "Regenerate: go test ./internal/planner -run TestGoldenPlans -update (give the reason for every changed plan in the commit message).\n"
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(header+strings.Join(lines, "\n")+"\n"), 0o644))
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	var want []string
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if !strings.HasPrefix(l, goldenHeaderPrefix) {
			want = append(want, l)
		}
	}
	if len(lines) < len(want) {
		want = want[:len(lines)] // a prefix of the set (the race detector's run)
	}
	if diff := goldenDiff(want, lines); diff != "" {
		t.Errorf("%s: the chosen plans changed (- golden, + now):\n%s\nIf the change is intended, rerun with -update (go test ./internal/planner -run TestGoldenPlans -update) and give the reason for it in the commit message.", path, diff)
	}
}

// goldenDiffLines is how many changed cases a failure shows.
const goldenDiffLines = 20

// goldenDiff lists the cases whose lines differ between want and got, keyed by each
// line's id (the text before the first " | "), in the order of got and then of the
// cases only want has, at most goldenDiffLines of them; "" when they are equal.
func goldenDiff(want, got []string) string {
	id := func(l string) string { k, _, _ := strings.Cut(l, " | "); return k }
	wantBy := make(map[string]string, len(want))
	for _, l := range want {
		wantBy[id(l)] = l
	}
	gotBy := make(map[string]bool, len(got))
	var cases []string // one entry per differing case
	for _, l := range got {
		gotBy[id(l)] = true
		switch w, ok := wantBy[id(l)]; {
		case !ok:
			cases = append(cases, "+ "+l+"\n")
		case w != l:
			cases = append(cases, "- "+w+"\n+ "+l+"\n")
		}
	}
	for _, l := range want {
		if !gotBy[id(l)] {
			cases = append(cases, "- "+l+"\n")
		}
	}
	if len(cases) == 0 {
		return ""
	}
	out := strings.Join(cases[:min(len(cases), goldenDiffLines)], "")
	if len(cases) > goldenDiffLines {
		out += fmt.Sprintf("... %d cases differ, the first %d shown\n", len(cases), goldenDiffLines)
	}
	return out
}
