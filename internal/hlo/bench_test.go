package hlo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/internal/cost"
)

// largeModule is a module of n instructions with metadata of about 250 bytes each, an
// all-gather every 100th, in a scheduled entry computation.
func largeModule(n int) string {
	var b strings.Builder
	b.WriteString("HloModule big, is_scheduled=true, num_partitions=8\n\nENTRY %main (p: f32[128,1024]) -> f32[128,1024] {\n")
	b.WriteString("  %v0 = f32[128,1024]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}\n")
	md := `metadata={op_name="jit(train_step)/jit(main)/transformer/layer/attention/dot_general" source_file="/home/user/project/model/transformer/attention.py" source_line=1234 deduplicated_name="fusion.1"}`
	for i := 1; i < n; i++ {
		if i%100 == 0 {
			fmt.Fprintf(&b, "  %%v%d = f32[1024,1024]{1,0} all-gather(%%v%d), channel_id=%d, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, %s\n", i, i-1, i, md)
			i++
			fmt.Fprintf(&b, "  %%v%d = f32[128,1024]{1,0} slice(%%v%d), slice={[0:128], [0:1024]}, %s\n", i, i-1, md)
			continue
		}
		fmt.Fprintf(&b, "  %%v%d = f32[128,1024]{1,0} add(%%v%d, %%v%d), %s\n", i, i-1, i-1, md)
	}
	fmt.Fprintf(&b, "  ROOT %%out = f32[128,1024]{1,0} copy(%%v%d)\n}\n", n-1)
	return b.String()
}

// BenchmarkAnalyzeLargeModule parses, analyses and builds the memory timeline of a
// 99,000-instruction module (about 33 MB): every position is a line index lookup, so
// the work is linear in the text.
func BenchmarkAnalyzeLargeModule(b *testing.B) {
	src := largeModule(99000)
	model, _ := cost.Profile("tpu-v5p")
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for range b.N {
		m, err := Parse(src, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		a, err := Analyze(context.Background(), m, Options{Model: model})
		if err != nil {
			b.Fatal(err)
		}
		if mem, err := a.Memory(context.Background()); err != nil || len(mem.Timeline) != 99001 { // the parameter, 98,999 ops and the root
			b.Fatalf("%d points, %v", len(mem.Timeline), err)
		}
	}
}

// TestAnalyzeLargeModuleCancelled: an analysis whose context has ended stops with its
// error.
func TestAnalyzeLargeModuleCancelled(t *testing.T) {
	m, err := Parse(largeModule(5000), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Analyze(ctx, m, Options{}); err != context.Canceled {
		t.Fatalf("Analyze: got %v, want context.Canceled", err)
	}
	if _, err := ParseContext(ctx, largeModule(5000), Limits{}); err != context.Canceled {
		t.Fatalf("ParseContext: got %v, want context.Canceled", err)
	}
	a, err := Analyze(context.Background(), m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Memory(ctx); err != context.Canceled {
		t.Fatalf("Memory: got %v, want context.Canceled", err)
	}
}
