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
	corpus, _ := filepath.Glob(filepath.Join("testdata", "corpus", "xla", "*.hlo"))
	for _, file := range append(files, corpus...) {
		if b, err := os.ReadFile(file); err == nil && len(b) < 8000 {
			f.Add(string(b))
		}
	}
	f.Add("HloModule m, num_partitions=4\nENTRY %e (p: f32[8]) -> f32[32] {\n  %p = f32[8]{0} parameter(0), sharding={devices=[4]<=[4]}\n  ROOT %ag = f32[32]{0} all-gather(%p), channel_id=1, replica_groups=[1,4]<=[4], dimensions={0}\n}\n")
	f.Add("HloModule m, num_partitions=2\nENTRY %e {\n  %p = (f32[2], s32[]) parameter(0)\n  ROOT %x = f32[2]{0} all-reduce(f32[2] %p), replica_groups={{0,1}}, to_apply=%add\n}\n")
	model, _ := cost.Profile("tpu-v5p")
	roof, _ := cost.RooflineOf("tpu-v5p")
	f.Fuzz(func(t *testing.T, src string) {
		m, err := Parse(src, Limits{MaxInstructions: 2000, MaxDevices: 4096})
		if err != nil {
			if !strings.HasPrefix(err.Error(), Field+": line ") {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		a, err := Analyze(context.Background(), m, Options{Model: model, MaxDevices: 4096})
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
			sum += c.TimeUS()
		}
		if d := sum - a.TimeUS; d > 1e-6*max(1, sum) || d < -1e-6*max(1, sum) {
			t.Fatalf("total %v != sum %v", a.TimeUS, sum)
		}
		// The schedule's step is its compute and its exposed communication; each site
		// splits its price into exposed and overlapped time.
		s, err := a.Schedule(context.Background(), ScheduleOptions{Roofline: &roof})
		if err != nil {
			t.Fatalf("schedule: %v", err)
		}
		var exposed float64
		for i, e := range s.Sites {
			if e.ExposedUS < -1e-9 || e.OverlappedUS < -1e-9 {
				t.Fatalf("negative exposure of %s: %+v", a.Collectives[i].Name, e)
			}
			exposed += e.ExposedUS
		}
		if tol := 1e-6 * max(1, s.StepUS); absf(s.StepUS-s.ComputeUS-s.ExposedUS) > tol || absf(exposed-s.ExposedUS) > tol {
			t.Fatalf("step %v != compute %v + exposed %v (sites %v)", s.StepUS, s.ComputeUS, s.ExposedUS, exposed)
		}
	})
}

func absf(x float64) float64 { return max(x, -x) }

// FuzzParseProfile: any text reads as a profile or fails with a field error naming a
// line and column; every cost read is a non-negative number.
func FuzzParseProfile(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "profiles", "pgle_sample.pbtxt")); err == nil {
		f.Add(string(b))
	}
	f.Add("costs { name: 'a' cost_us: 1 extra { x: [1, 2] } }\nlatencies < source: \"a\" >")
	f.Add("costs { name: \"a\\\"b\" cost_us: 1e300 }")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := ParseProfile(text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), ProfileField+": line ") {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		for name, v := range p {
			if !(v >= 0) {
				t.Fatalf("cost %v of %q", v, name)
			}
		}
	})
}

// FuzzParseGroups: replica_groups text parses or fails with an error; parsed groups list
// ids below the limit, and GroupAxes on a small mesh either decodes them to axes whose
// sizes multiply to the group size or says why not.
func FuzzParseGroups(f *testing.F) {
	for _, s := range []string{"{}", "{{0,1},{2,3}}", "[4,2]<=[8]", "[2,4]<=[4,2]T(1,0)", "[4,2]<=[2,2,2]T(1,0,2)", "{{0,2},{1,3},{4,6},{5,7}}", "[1,8]<=[2,2,2]T(2,0,1)", "mesh['x'=2,'y'=4] {'y'}", "mesh['a'=8] {'a:(2)2'}"} {
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

// FuzzNamedMesh: the named form of replica groups parses or fails with an error; parsed,
// its groups are of one size and list every device of the mesh exactly once.
func FuzzNamedMesh(f *testing.F) {
	for _, s := range []string{"mesh['x'=8] {'x'}", "mesh['axis_0'=2,'axis_1'=4] {'axis_1'}", "mesh['a'=2,'b'=4] {'b','a'}",
		"mesh['a'=2,'b'=4] {'b:(2)2'}", "mesh['a'=2,'b'=2], device_ids=([2,2]<=[2,2]T(1,0)) {'a'}", "mesh['a'=4] {}",
		"mesh['a'=2,'b'=2], device_ids=(3,2,1,0) {'b'}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		nm, err := ParseNamedMesh(text, 64)
		if err != nil {
			return
		}
		n := nm.NumDevices()
		if n < 1 || n > 64 {
			t.Fatalf("%q: %d devices", text, n)
		}
		seen := make([]bool, n)
		groups := nm.Groups()
		for _, g := range groups {
			if len(g) != len(groups[0]) {
				t.Fatalf("%q: groups of sizes %d and %d", text, len(groups[0]), len(g))
			}
			for _, id := range g {
				if id < 0 || id >= n || seen[id] {
					t.Fatalf("%q: device %d out of range or twice in %v", text, id, groups)
				}
				seen[id] = true
			}
		}
		for id, ok := range seen {
			if !ok {
				t.Fatalf("%q: device %d in no group: %v", text, id, groups)
			}
		}
	})
}
