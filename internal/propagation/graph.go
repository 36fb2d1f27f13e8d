package propagation

import (
	"sort"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Graph is an op graph to shard: tensors by id, ops in any order (a DAG outside while
// regions), and the graph's arguments and results.
type Graph struct {
	Tensors map[string]*Tensor
	Ops     []Op
	Inputs  []string
	Outputs []string
}

// Tensor is one value of the graph. A nil Sharding means no annotation: every dim open
// and empty.
type Tensor struct {
	Shape    []int64
	ElemBits int
	Sharding *sharding.Sharding
}

// Op is one operation. Kind is a StableHLO op name (see SupportedOps); Attrs holds
// its StableHLO attributes by name, with integer lists as []int, []int64 or decoded
// JSON ([]any of float64 or json.Number); nested dimension-number objects as
// map[string]any. Rule is the Shardy rule of a "custom" op. An "opaque" op (any operands
// and results) is a barrier: nothing propagates through it. A "while" op has Cond and
// Body regions whose tensors live in the graph's Tensors.
type Op struct {
	Name     string
	Kind     string
	Operands []string
	Results  []string
	Attrs    map[string]any
	Rule     string
	Cond     *Region
	Body     *Region
}

// NumOps counts g's ops, those of while regions included.
func (g *Graph) NumOps() int { return countOps(g.Ops) }

func countOps(ops []Op) int {
	n := len(ops)
	for _, op := range ops {
		for _, r := range []*Region{op.Cond, op.Body} {
			if r != nil {
				n += countOps(r.Ops)
			}
		}
	}
	return n
}

// Region is the body or condition of a while op: block parameters, ops, returned values.
type Region struct {
	Params  []string
	Ops     []Op
	Returns []string
}

// Conflict resolution strategies.
const (
	Aggressive          = "aggressive"
	Basic               = "basic"
	BasicThenAggressive = "basic_then_aggressive"
)

// Options tune propagation. The zero value is aggressive conflict resolution without
// the op-priority schedule; DefaultOptions is what the API defaults to.
type Options struct {
	// ConflictResolution is Aggressive (default when empty), Basic or
	// BasicThenAggressive.
	ConflictResolution string
	// OpPriority runs Shardy's five-stage op-priority schedule (pass-through ops first).
	OpPriority bool

	// revisitSettled turns off the skip of settled nodes (propagator.settled): every
	// visit projects. Tests compare the two.
	revisitSettled bool
}

// DefaultOptions is aggressive conflict resolution with op priorities, as API.md
// defaults.
func DefaultOptions() Options { return Options{ConflictResolution: Aggressive, OpPriority: true} }

// sortedKeys returns the keys of m sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
