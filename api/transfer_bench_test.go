package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/shardplan/shardplan/internal/testgen"
)

// BenchmarkTransferLlama70B plans the Llama 3 70B weight sync end to end (decode, plan,
// encode): FSDP=32 x TP=8 on 256 h100 GPUs to 16 TP=8 replicas on 128 other GPUs
// (disjoint), and to 32 TP=8 replicas on the same 256 GPUs (colocated). It reports the
// answer's size and the plan's time against the fabric's bound.
func BenchmarkTransferLlama70B(b *testing.B) {
	for _, c := range []struct {
		name      string
		colocated bool
	}{{"disjoint", false}, {"colocated", true}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := New(Deps{Limits: DefaultLimits()})
			if err != nil {
				b.Fatal(err)
			}
			body := llama70B(c.colocated)
			var rec []byte
			for b.Loop() {
				r := postTransfer(b, s, body, "")
				if r.Code != http.StatusOK {
					b.Fatalf("%d %s", r.Code, r.Body.String())
				}
				rec = r.Body.Bytes()
			}
			var resp TransferResponse
			if err := json.Unmarshal(rec, &resp); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(rec)), "bytes/answer")
			b.ReportMetric(resp.Summary.TimeUS/1e3, "plan_ms")
			b.ReportMetric(resp.Summary.TimeLowerBoundUS/1e3, "bound_ms")
			b.ReportMetric(resp.Summary.TimeUS/resp.Summary.TimeLowerBoundUS, "x_bound")
		})
	}
}

// BenchmarkTransferMoE1T plans a 1-trillion-parameter MoE's expert weights in fp8
// (Kimi K2's shapes: 60 MoE layers of 384 experts, hidden 7168, expert ffn 2048; about
// 1.01e12 parameters) from a trainer on 256 h100 GPUs (fsdp=4, ep=64) to 16 colocated
// replicas of TP=16 (two nodes each), the setup checkpoint-engine reports on H20.
func BenchmarkTransferMoE1T(b *testing.B) {
	tensors := testgen.MoELayer(384, 7168, 2048, 60)
	for i := range tensors {
		tensors[i].DType = "f8e4m3fn"
	}
	body := testgen.TransferRequestJSON("h100", 256, testgen.At("trainer", "fsdp=4,ep=64", 0), testgen.Replicas("ep=1,tp=16", 16, 16, 0), tensors)
	s, err := New(Deps{Limits: DefaultLimits()})
	if err != nil {
		b.Fatal(err)
	}
	var rec []byte
	for b.Loop() {
		r := postTransfer(b, s, body, "")
		if r.Code != http.StatusOK {
			b.Fatalf("%d %s", r.Code, r.Body.String())
		}
		rec = r.Body.Bytes()
	}
	var resp TransferResponse
	if err := json.Unmarshal(rec, &resp); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(rec)), "bytes/answer")
	b.ReportMetric(resp.Summary.TimeUS/1e3, "plan_ms")
	b.ReportMetric(resp.Summary.TimeLowerBoundUS/1e3, "bound_ms")
	b.ReportMetric(resp.Summary.TimeUS/resp.Summary.TimeLowerBoundUS, "x_bound")
	b.ReportMetric(float64(resp.Summary.TensorBytes)/1e9, "GB")
}
