package stablehlo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLineIndexIsLineCol: the line index gives lineCol's line and column at every
// offset of texts with empty lines, a leading and a trailing newline, CRLF, none at
// all, and out-of-range offsets.
func TestLineIndexIsLineCol(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	texts := []string{"", "\n", "\n\n", "a", "ab\ncd", "\nab\n\ncd\n", "x\r\ny\r\n", strings.Repeat("ab\n", 50)}
	for range 20 {
		var b strings.Builder
		for range rng.IntN(200) {
			b.WriteByte("ab\n"[rng.IntN(3)])
		}
		texts = append(texts, b.String())
	}
	for _, src := range texts {
		var x lineIndex
		for off := -2; off <= len(src)+2; off++ {
			wl, wc := lineCol(src, off)
			gl, gc := x.lineCol(src, off)
			require.Equal(t, [2]int{wl, wc}, [2]int{gl, gc}, "%q at %d", src, off)
		}
	}
}

// opaqueModule is a function of n custom calls in a chain: n ops the import does not
// model, each of which records its line and column.
func opaqueModule(n int) string {
	var b strings.Builder
	b.WriteString("sdy.mesh @mesh = <[\"x\"=2]>\n")
	b.WriteString("func.func @main(%arg0: tensor<32x256xf32>) -> tensor<32x256xf32> {\n")
	prev := "%arg0"
	for i := range n {
		fmt.Fprintf(&b, "  %%o%d = stablehlo.custom_call @foo(%s) : (tensor<32x256xf32>) -> tensor<32x256xf32>\n", i, prev)
		prev = fmt.Sprintf("%%o%d", i)
	}
	fmt.Fprintf(&b, "  return %s : tensor<32x256xf32>\n}\n", prev)
	return b.String()
}

// TestOpaqueOpsNameTheirLines: every op the import does not model names its own line
// (the function's first op is on line 3).
func TestOpaqueOpsNameTheirLines(t *testing.T) {
	imp, err := Read(context.Background(), opaqueModule(300), Options{})
	require.NoError(t, err)
	require.Len(t, imp.Opaque, 300)
	for i, o := range imp.Opaque {
		assert.Equal(t, i+3, o.Line, "op %d", i)
		assert.Equal(t, 3, o.Column, "op %d", i)
	}
}

// BenchmarkReadOpaque imports chains of custom calls: the CPU time per op of the module
// (cpu-ns/op-in-module) stays flat as the module grows (each op's line is found in the
// line index, not counted from the start).
func BenchmarkReadOpaque(b *testing.B) {
	for _, n := range []int{1000, 10000, 80000} {
		src := opaqueModule(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			c0 := cpuTime()
			for b.Loop() {
				if _, err := Read(context.Background(), src, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/float64(n), "cpu-ns/op-in-module")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system (a machine shared with
// other work disturbs it less than the wall clock).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestReadStopsWithItsContext: a module of thousands of ops read under a cancelled
// context returns the context's error, not an import, whether the parse or the import
// finds it done; the same module reads under a live one.
func TestReadStopsWithItsContext(t *testing.T) {
	src := opaqueModule(5000)
	_, err := Read(context.Background(), src, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Read(ctx, src, Options{})
	assert.ErrorIs(t, err, context.Canceled)
	m, err := Parse(context.Background(), src, Limits{})
	require.NoError(t, err)
	_, err = FromModule(ctx, m, Options{})
	assert.ErrorIs(t, err, context.Canceled)
}
