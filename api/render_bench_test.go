package api

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardplan/shardplan/internal/cache"
	"github.com/shardplan/shardplan/internal/planner"
)

// BenchmarkReshardRender times what a reshard miss costs the server after the planner:
// rendering the plan's steps (pairs, transfers, shardings) and encoding the answer, per
// request, over the request bodies in SHARDPLAN_RANDOMSET_BODIES (skipped without;
// planner's TestRandomSetDump writes testgen.RandomSet there). Each body is planned
// once before the timer starts; the percentiles are per answer, in µs.
//
//	SHARDPLAN_RANDOMSET_BODIES=/tmp/rs.jsonl go test -run TestRandomSetDump ./internal/planner/
//	SHARDPLAN_RANDOMSET_BODIES=/tmp/rs.jsonl go test -run '^$' -bench BenchmarkReshardRender -benchtime 20x ./api/
func BenchmarkReshardRender(b *testing.B) {
	path := os.Getenv("SHARDPLAN_RANDOMSET_BODIES")
	if path == "" {
		b.Skip("set SHARDPLAN_RANDOMSET_BODIES to a file of reshard request bodies, one per line")
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	c, err := cache.Open(cache.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := New(Deps{Memo: c})
	if err != nil {
		b.Fatal(err)
	}
	type planned struct {
		in *reshardInput
		p  *planner.Plan
	}
	var set []planned
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		in := &reshardInput{include: map[string]bool{}}
		if err := decodeBytes(sc.Bytes(), &in.req); err != nil {
			b.Fatal(err)
		}
		if err := s.prepareReshard(in); err != nil {
			b.Fatal(err)
		}
		preq := &planner.Request{Mesh: in.mesh, Shape: in.req.Shape, ElemBits: in.elemBits, Source: in.src, Target: in.tgt, Model: in.model, AllowedOps: in.ops}
		p, err := planner.Reshard(context.Background(), preq)
		if err != nil {
			b.Fatal(err)
		}
		set = append(set, planned{in, p})
	}
	var lat []float64
	for b.Loop() {
		for _, x := range set {
			t0 := time.Now()
			resp, err := s.renderPlan(context.Background(), x.in, x.p, nil, s.newBudget())
			if err != nil {
				b.Fatal(err)
			}
			v, err := resp.verdict()
			if err != nil {
				b.Fatal(err)
			}
			body, err := encodeReshardJSON(resp)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := newPlanEntry(v, body); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
		}
	}
	slices.Sort(lat)
	for _, q := range []struct {
		name string
		at   float64
	}{{"p30", 0.3}, {"p50", 0.5}, {"p70", 0.7}, {"p90", 0.9}} {
		b.ReportMetric(lat[int(q.at*float64(len(lat)))], q.name+"-µs")
	}
}

// BenchmarkReshardAnswer512 times a default reshard answer on 512 devices through the
// server (no memo: every request plans, renders and encodes) and reports its size.
//
//	go test -run '^$' -bench BenchmarkReshardAnswer512 -benchtime 20x ./api/
func BenchmarkReshardAnswer512(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"transpose", `{"mesh":"x=8,y=8,z=8","shape":[8192,8192],"dtype":"bf16","source":[["x","y"],"z"],"target":["z",["x","y"]]}`},
		{"all_to_all_v", `{"mesh":"x=8,y=8,z=8","shape":[8192,8192],"dtype":"bf16","source":[["x","y"],"z"],"target":["z",["x","y"]],"allowed_ops":["all_to_all_v"]}`},
		{"h100 transpose", `{"mesh":"x=8,y=64","shape":[8192,8192],"dtype":"bf16","cost_model":"h100","source":["x","y"],"target":["y","x"]}`},
		{"h100 gather", `{"mesh":"x=8,y=8,z=8","shape":[8192,8192],"dtype":"bf16","cost_model":"h100","source":[["x","y","z"],null],"target":[null,["z","y","x"]]}`},
		{"collective_permute", `{"mesh":"x=8,y=8,z=8","shape":[8192,8192],"dtype":"bf16","source":[["x","y","z"],null],"target":[["z","y","x"],null],"allowed_ops":["collective_permute"]}`},
	} {
		b.Run(bc.name, func(b *testing.B) { benchReshardAnswer(b, bc.body) })
	}
}

// BenchmarkReshardAnswer65536 times a default reshard answer on 65,536 devices through
// the server (no memo: every request plans, renders and encodes) and reports its size.
// The answers carry their moves as runs.
//
//	go test -run '^$' -bench BenchmarkReshardAnswer65536 -benchtime 20x ./api/
func BenchmarkReshardAnswer65536(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"h100 transpose", `{"mesh":"a=256,b=256","shape":[65536,65536],"dtype":"bf16","source":[["a","b"],null],"target":[null,["a","b"]],"cost_model":"h100"}`},
		{"collective_permute 256x256", `{"mesh":"a=256,b=256","shape":[65536,65536],"dtype":"bf16","source":["a","b"],"target":["b","a"],"allowed_ops":["collective_permute"]}`},
		{"collective_permute 16^4", `{"mesh":"a=16,b=16,c=16,d=16","shape":[65536,65536],"dtype":"bf16","source":[["a","b"],["c","d"]],"target":[["c","d"],["a","b"]],"allowed_ops":["collective_permute"]}`},
	} {
		b.Run(bc.name, func(b *testing.B) { benchReshardAnswer(b, bc.body) })
	}
}

// benchReshardAnswer posts body to a fresh server (no memo hit: every request plans,
// renders and encodes) once per iteration and reports the answer's size.
func benchReshardAnswer(b *testing.B, body string) {
	s, err := New(Deps{})
	if err != nil {
		b.Fatal(err)
	}
	var size int
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/reshard", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body.String())
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/answer")
}
