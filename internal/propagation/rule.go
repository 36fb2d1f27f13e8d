package propagation

import (
	"strconv"
	"strings"
)

// FactorType says what sharding a factor costs once the op runs: nothing (FactorPassThrough),
// an all-reduce or reduce-scatter of the results (FactorReduction), a gather before the op
// (FactorNeedReplication), or a halo exchange / collective permute (FactorPermutation).
type FactorType uint8

// The factor types of Shardy's OpShardingRule.
const (
	FactorPassThrough FactorType = iota
	FactorReduction
	FactorNeedReplication
	FactorPermutation
)

// String is the type's name as it appears in a printed rule.
func (t FactorType) String() string {
	switch t {
	case FactorReduction:
		return "reduction"
	case FactorNeedReplication:
		return "need_replication"
	case FactorPermutation:
		return "permutation"
	}
	return "pass_through"
}

// Rule is Shardy's OpShardingRule: the op's tensors (operands, then results) described
// over shared factors (einsum indices). Operands[t][d] lists the factors of dim d of
// operand t, major to minor; a list of several factors is a compound factor. Every dim
// maps at least one factor, and a factor appears at most once per tensor.
type Rule struct {
	FactorSizes []int64
	Operands    [][][]int
	Results     [][][]int
	Types       []FactorType
	// Blocked factors never carry propagation, in either direction.
	Blocked []bool
	// Custom marks a rule the user wrote (op "custom").
	Custom bool
}

// NumTensors is the number of operands plus results.
func (r *Rule) NumTensors() int { return len(r.Operands) + len(r.Results) }

// Dims returns the factor lists of tensor t (operands first, then results).
func (r *Rule) Dims(t int) [][]int {
	if t < len(r.Operands) {
		return r.Operands[t]
	}
	return r.Results[t-len(r.Operands)]
}

// newRule returns an empty rule for tensors of the given ranks.
func newRule(operandRanks, resultRanks []int) *Rule {
	r := &Rule{Operands: make([][][]int, len(operandRanks)), Results: make([][][]int, len(resultRanks))}
	for i, n := range operandRanks {
		r.Operands[i] = make([][]int, n)
	}
	for i, n := range resultRanks {
		r.Results[i] = make([][]int, n)
	}
	return r
}

// addFactor adds a factor of the given size and type and returns its index.
func (r *Rule) addFactor(size int64, t FactorType) int {
	r.FactorSizes = append(r.FactorSizes, size)
	r.Types = append(r.Types, t)
	r.Blocked = append(r.Blocked, false)
	return len(r.FactorSizes) - 1
}

// mapDim appends factor f (minor-most so far) to dim d of tensor t.
func (r *Rule) mapDim(t, d, f int) {
	dims := r.Dims(t)
	dims[d] = append(dims[d], f)
}

// finish gives every dim without a factor a fresh size-1 factor.
func (r *Rule) finish() *Rule {
	for t := range r.NumTensors() {
		for d, fs := range r.Dims(t) {
			if len(fs) == 0 {
				r.mapDim(t, d, r.addFactor(1, FactorPassThrough))
			}
		}
	}
	return r
}

// factorLetters are the names of the first 18 factors.
const factorLetters = "ijklmnopqrstuvwxyz"

// FactorName is the printed symbol of factor i: i, j, ..., z, then z_1, z_2, ...
func FactorName(i int) string {
	if i < len(factorLetters) {
		return factorLetters[i : i+1]
	}
	return "z_" + strconv.Itoa(i-17)
}

// String prints r in Shardy's notation, e.g.
// ([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}.
func (r *Rule) String() string {
	var b strings.Builder
	writeTensors := func(ts [][][]int) {
		b.WriteByte('(')
		for t, dims := range ts {
			if t > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('[')
			for d, fs := range dims {
				if d > 0 {
					b.WriteString(", ")
				}
				for _, f := range fs {
					b.WriteString(FactorName(f))
				}
			}
			b.WriteByte(']')
		}
		b.WriteByte(')')
	}
	writeTensors(r.Operands)
	b.WriteString("->")
	writeTensors(r.Results)
	b.WriteString(" {")
	for i, s := range r.FactorSizes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(FactorName(i))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(s, 10))
	}
	b.WriteByte('}')
	writeSet := func(name string, pick func(i int) bool) {
		n := 0
		for i := range r.FactorSizes {
			if !pick(i) {
				continue
			}
			if n == 0 {
				b.WriteString(" ")
				b.WriteString(name)
				b.WriteString("={")
			} else {
				b.WriteString(", ")
			}
			b.WriteString(FactorName(i))
			n++
		}
		if n > 0 {
			b.WriteByte('}')
		}
	}
	writeSet("reduction", func(i int) bool { return r.Types[i] == FactorReduction })
	writeSet("need_replication", func(i int) bool { return r.Types[i] == FactorNeedReplication })
	writeSet("permutation", func(i int) bool { return r.Types[i] == FactorPermutation })
	writeSet("blocked_propagation", func(i int) bool { return r.Blocked[i] })
	if r.Custom {
		b.WriteString(" custom")
	}
	return b.String()
}

// tensorFactors reports, per factor, whether tensor t maps it.
func (r *Rule) hasFactor(t, f int) bool {
	for _, fs := range r.Dims(t) {
		for _, g := range fs {
			if g == f {
				return true
			}
		}
	}
	return false
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
