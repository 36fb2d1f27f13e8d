package hlo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// FuzzParse: any text parses or fails with a field error naming a line and column; a
// parsed module analyzes (on its default mesh) without panicking, and its totals are
// the sum of its collectives.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.hlo"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil && len(b) < 8000 {
			f.Add(string(b))
		}
	}
	f.Add("HloModule m, num_partitions=4\nENTRY %e (p: f32[8]) -> f32[32] {\n  %p = f32[8]{0} parameter(0), sharding={devices=[4]<=[4]}\n  ROOT %ag = f32[32]{0} all-gather(%p), channel_id=1, replica_groups=[1,4]<=[4], dimensions={0}\n}\n")
	f.Add("HloModule m, num_partitions=2\nENTRY %e {\n  %p = (f32[2], s32[]) parameter(0)\n  ROOT %x = f32[2]{0} all-reduce(f32[2] %p), replica_groups={{0,1}}, to_apply=%add\n}\n")
	model, _ := cost.Profile("tpu-v5p")
	f.Fuzz(func(t *testing.T, src string) {
		m, err := Parse(src, Limits{MaxInstructions: 2000, MaxDevices: 4096})
		if err != nil {
			if !strings.HasPrefix(err.Error(), Field+": line ") {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		a, err := Analyze(context.Background(), m, Options{Model: model})
		if err != nil {
			if !strings.Contains(err.Error(), "line ") && !strings.HasPrefix(err.Error(), "mesh") {
				t.Fatalf("analysis error without a position: %v", err)
			}
			return
		}
		var sum float64
		for _, c := range a.Collectives {
			if c.Cost.TimeUS < 0 || c.BytesPerDevice < 0 {
				t.Fatalf("negative price for %s: %+v", c.Name, c.Cost)
			}
			sum += c.Cost.TimeUS
		}
		if d := sum - a.TimeUS; d > 1e-6 || d < -1e-6 {
			t.Fatalf("total %v != sum %v", a.TimeUS, sum)
		}
	})
}

// FuzzParseGroups: replica_groups text parses or fails with an error; parsed groups list
// ids below the limit, and GroupAxes on a small mesh either decodes them to axes whose
// sizes multiply to the group size or says why not.
func FuzzParseGroups(f *testing.F) {
	for _, s := range []string{"{}", "{{0,1},{2,3}}", "[4,2]<=[8]", "[2,4]<=[4,2]T(1,0)", "[4,2]<=[2,2,2]T(1,0,2)", "{{0,2},{1,3},{4,6},{5,7}}", "[1,8]<=[2,2,2]T(2,0,1)"} {
		f.Add(s)
	}
	mesh, err := sharding.ParseMeshString("x=2,y=4", "mesh")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		groups, err := ParseGroups(text, 8)
		if err != nil {
			return
		}
		for _, g := range groups {
			for _, id := range g {
				if id < 0 || id >= 8 {
					t.Fatalf("id %d out of range in %q", id, text)
				}
			}
		}
		axes, err := GroupAxes(mesh, groups)
		if err != nil {
			return
		}
		size := 8
		if len(groups) > 0 {
			size = len(groups[0])
		}
		n := 1
		for _, a := range axes {
			n *= a.Size
		}
		if n != size {
			t.Fatalf("%q: axes %v span %d devices, groups have %d", text, axes, n, size)
		}
	})
}
