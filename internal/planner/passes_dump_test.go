package planner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/stretchr/testify/require"
)

// TestPassesDump writes the chosen plan of the first 120 reshards of the random set on
// tpu-v5p and h100, with EffortFast and the default effort: its time, candidate name,
// search expansions and steps (op, axes, sharding after), one line each, to the file
// SHARDPLAN_PASSES_OUT names (skipped without it). Two builds' files are byte-identical
// when a change to the search's passes leaves every plan as it was.
//
//	SHARDPLAN_PASSES_OUT=/tmp/before.txt go test -run TestPassesDump ./internal/planner/
func TestPassesDump(t *testing.T) {
	out := os.Getenv("SHARDPLAN_PASSES_OUT")
	if out == "" {
		t.Skip("set SHARDPLAN_PASSES_OUT to write the plans")
	}
	w, err := os.Create(out)
	require.NoError(t, err)
	defer w.Close()
	set := randomSet(t)[:120]
	for _, profile := range []string{"tpu-v5p", "h100"} {
		f, ok := cost.Profile(profile)
		require.True(t, ok)
		for _, effort := range []Effort{EffortFast, ""} {
			for i, pb := range set {
				r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: f, Effort: effort}
				p, err := Reshard(context.Background(), r)
				require.NoError(t, err)
				var ops []string
				for _, s := range p.Steps {
					ops = append(ops, fmt.Sprintf("%s%v->%s", s.Op, s.MeshAxes, s.After))
				}
				_, err = fmt.Fprintf(w, "%s %q %d %.9g %q %d %s\n", profile, effort, i, p.Summary.TimeUS, p.name,
					p.Summary.SearchExpansions, strings.Join(ops, " "))
				require.NoError(t, err)
			}
		}
	}
}
