package propagation

import (
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Einsum is a parsed einsum equation: one index string per operand and the result's.
type Einsum struct {
	Operands []string
	Result   string
}

// ParseEinsum parses an equation such as "bij,bjk->bik" (spaces ignored, letters a-z and
// A-Z). Without "->" the result is every index used once, in alphabetical order, as in
// numpy. Ellipses and repeated indices within one operand (traces) are rejected. Every
// error is a *sharding.FieldError on field; ParseEinsum never panics.
func ParseEinsum(eq, field string) (Einsum, error) {
	s := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, eq)
	if strings.Contains(s, "...") {
		return Einsum{}, sharding.Fieldf(field, "ellipsis (...) is not supported; name every index")
	}
	lhs, rhs, explicit := strings.Cut(s, "->")
	if strings.Contains(rhs, "->") {
		return Einsum{}, sharding.Fieldf(field, "equation %q has more than one \"->\"", eq)
	}
	if lhs == "" {
		return Einsum{}, sharding.Fieldf(field, "equation %q has no operands; write e.g. \"bij,bjk->bik\"", eq)
	}
	var e Einsum
	count := map[byte]int{}
	for i, term := range strings.Split(lhs, ",") {
		if err := checkTerm(term); err != nil {
			return Einsum{}, sharding.Fieldf(field, "operand %d (%q): %s", i, term, err)
		}
		for j := range len(term) {
			count[term[j]]++
		}
		e.Operands = append(e.Operands, term)
	}
	if explicit {
		if err := checkTerm(rhs); err != nil {
			return Einsum{}, sharding.Fieldf(field, "result (%q): %s", rhs, err)
		}
		for j := range len(rhs) {
			if count[rhs[j]] == 0 {
				return Einsum{}, sharding.Fieldf(field, "result index %q appears in no operand", rhs[j])
			}
		}
		e.Result = rhs
	} else {
		var b []byte
		for c := byte('A'); c <= 'z'; c++ {
			if count[c] == 1 {
				b = append(b, c)
			}
		}
		e.Result = string(b)
	}
	return e, nil
}

func checkTerm(term string) error {
	seen := map[byte]bool{}
	for j := range len(term) {
		c := term[j]
		if !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') {
			return errorf("index %q is not a letter", c)
		}
		if seen[c] {
			return errorf("index %q appears twice (traces are not supported)", c)
		}
		seen[c] = true
	}
	return nil
}

// rule builds the sharding rule of e for the given shapes: one factor per index, sized
// by the operands (which must agree); indices missing from the result are reductions.
// Factors are numbered by first appearance in the result, then in the operands.
func (e Einsum) rule(operands [][]int64, result []int64, field string) (*Rule, error) {
	if len(operands) != len(e.Operands) {
		return nil, sharding.Fieldf(field, "the equation has %d operands but the op has %d", len(e.Operands), len(operands))
	}
	size := map[byte]int64{}
	for i, term := range e.Operands {
		if len(term) != len(operands[i]) {
			return nil, sharding.Fieldf(field, "operand %d has rank %d but %q names %d indices", i, len(operands[i]), term, len(term))
		}
		for d := range len(term) {
			c := term[d]
			if s, ok := size[c]; ok && s != operands[i][d] {
				return nil, sharding.Fieldf(field, "index %q has size %d in one operand and %d in operand %d dim %d", c, s, operands[i][d], i, d)
			}
			size[c] = operands[i][d]
		}
	}
	if len(e.Result) != len(result) {
		return nil, sharding.Fieldf(field, "the result has rank %d but %q names %d indices", len(result), e.Result, len(e.Result))
	}
	for d := range len(e.Result) {
		if s := size[e.Result[d]]; s != result[d] {
			return nil, sharding.Fieldf(field, "result dim %d has size %d but index %q has size %d", d, result[d], e.Result[d], s)
		}
	}
	ranks := make([]int, len(operands))
	for i := range operands {
		ranks[i] = len(operands[i])
	}
	r := newRule(ranks, []int{len(result)})
	factor := map[byte]int{}
	inResult := map[byte]bool{}
	for d := range len(e.Result) {
		inResult[e.Result[d]] = true
	}
	get := func(c byte) int {
		if f, ok := factor[c]; ok {
			return f
		}
		t := FactorPassThrough
		if !inResult[c] {
			t = FactorReduction
		}
		f := r.addFactor(size[c], t)
		factor[c] = f
		return f
	}
	for d := range len(e.Result) {
		r.mapDim(len(operands), d, get(e.Result[d]))
	}
	for i, term := range e.Operands {
		for d := range len(term) {
			r.mapDim(i, d, get(term[d]))
		}
	}
	return r.finish(), nil
}
