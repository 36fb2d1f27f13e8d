package transfer

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/internal/fielderr"
)

// expandNaive is the oracle of Names: every name written out, i-major.
func expandNaive(pattern string, ri, rj int) []string {
	hasI, hasJ := strings.Contains(pattern, "{i}"), strings.Contains(pattern, "{j}")
	if ri > 0 && !hasI {
		pattern += ".{i}"
	}
	if rj > 0 && !hasJ {
		pattern += ".{j}"
	}
	var out []string
	for i := range max(ri, 1) {
		for j := range max(rj, 1) {
			out = append(out, strings.ReplaceAll(strings.ReplaceAll(pattern, "{i}", strconv.Itoa(i)), "{j}", strconv.Itoa(j)))
		}
	}
	return out
}

func TestNames(t *testing.T) {
	cases := []struct {
		name   string
		ri, rj int
		want   []string // first names, in order
		count  int
		err    string
	}{
		{"norm", 0, 0, []string{"norm"}, 1, ""},
		{"w", 3, 0, []string{"w.0", "w.1", "w.2"}, 3, ""},
		{"layers.{i}.up", 2, 0, []string{"layers.0.up", "layers.1.up"}, 2, ""},
		{"l.{i}.e.{j}.w", 2, 3, []string{"l.0.e.0.w", "l.0.e.1.w", "l.0.e.2.w", "l.1.e.0.w"}, 6, ""},
		{"e{j}/l{i}/{i}", 2, 2, []string{"e0/l0/0", "e1/l0/0", "e0/l1/1", "e1/l1/1"}, 4, ""},
		{"l.{i}", 2, 2, []string{"l.0.0", "l.0.1", "l.1.0"}, 4, ""},
		{"odd {brace", 2, 0, []string{"odd {brace.0"}, 2, ""},
		{"l.{k}", 2, 0, nil, 0, `placeholder "{k}"`},
		{"l.{layer}.{i}", 2, 0, nil, 0, `placeholder "{layer}"`},
		{"l.{}", 2, 0, nil, 0, `placeholder "{}"`},
		{"l.{i}", 0, 0, nil, 0, "give repeat"},
		{"l.{i}.{j}", 2, 0, nil, 0, "give repeat_j"},
	}
	for _, c := range cases {
		n, err := NewNames(c.name, c.ri, c.rj, "tensors[0].name")
		if c.err != "" {
			es, ok := fielderr.As(err)
			if !ok || len(es) != 1 || es[0].Field != "tensors[0].name" || !strings.Contains(es[0].Message, c.err) {
				t.Errorf("%q: got %v, want an error on tensors[0].name with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.name, err)
		}
		if n.Count() != c.count {
			t.Errorf("%q: count %d, want %d", c.name, n.Count(), c.count)
		}
		for k, w := range c.want {
			if got := n.At(k); got != w {
				t.Errorf("%q name %d: %q, want %q", c.name, k, got, w)
			}
		}
		checkAgainstOracle(t, c.name, c.ri, c.rj)
	}
}

// checkAgainstOracle compares Names with the written-out names: each name and the
// JSON bytes of all of them.
func checkAgainstOracle(t *testing.T, pattern string, ri, rj int) {
	t.Helper()
	n, err := NewNames(pattern, ri, rj, "f")
	if err != nil {
		return
	}
	want := expandNaive(pattern, ri, rj)
	if n.Count() != len(want) {
		t.Fatalf("%q x %d x %d: count %d, want %d", pattern, ri, rj, n.Count(), len(want))
	}
	total := int64(0)
	for k, w := range want {
		if got := n.At(k); got != w {
			t.Fatalf("%q x %d x %d: name %d is %q, want %q", pattern, ri, rj, k, got, w)
		}
		total += jsonStringBytes(w)
	}
	if got := n.JSONBytes(); got != total {
		t.Fatalf("%q x %d x %d: JSONBytes %d, want %d", pattern, ri, rj, got, total)
	}
}

func TestNamesCountsLargeRepeats(t *testing.T) {
	for _, c := range []struct{ ri, rj int }{{1, 1}, {9, 1}, {10, 1}, {11, 1}, {100, 7}, {1001, 13}, {12345, 3}} {
		checkAgainstOracle(t, "layers.{i}.experts.{j}.\"w\"<{i}>", c.ri, c.rj)
	}
	// Sizes without the names: 2^20 names of 200 placeholders each.
	n, err := NewNames(strings.Repeat("{i}.", 200)+"w", 1<<20, 0, "f")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.JSONBytes(); got < 200*(1<<20) {
		t.Fatalf("JSONBytes %d: below 200 bytes a name", got)
	}
}

// FuzzNames: any name and repeats give an error naming the field or names that match
// the written-out ones, with their JSON size.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"layers.{i}.w", "l.{i}.e.{j}", "{j}{i}{i}", "x{", "a{b}c", "{i", "\"<&>\u2028\xff"} {
		f.Add(s, 3, 2)
	}
	f.Fuzz(func(t *testing.T, pattern string, ri, rj int) {
		ri, rj = ri%40, rj%40
		if ri < 0 || rj < 0 {
			return // the API refuses them before (repeat >= 1)
		}
		checkAgainstOracle(t, pattern, ri, rj)
	})
}

// TestBoundStopsAtDeadline: the bound's loop over a class's cells ends with the
// context's error.
func TestBoundStopsAtDeadline(t *testing.T) {
	p := randomProblem(t, rand.New(rand.NewPCG(3, 39)), 4, 64)
	c := p.classes()[0]
	budget := DefaultMaxCells
	if err := c.build(context.Background(), p, "t", &budget); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newBoundLoads(p).add(ctx, p.Fabric, c, 1); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
