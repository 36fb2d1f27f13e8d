package propagation

import (
	"strconv"

	"github.com/shardplan/shardplan/internal/sharding"
)

// maxRuleFactors bounds the factors of a written rule (and so its size).
const maxRuleFactors = 1024

// ParseRule parses a rule in Shardy's notation:
//
//	([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}
//
// Factor symbols are a lower-case letter optionally followed by _N (z_1); a compound dim
// concatenates them ([ij]). Factor indices follow the order of the sizes block, which
// must declare every factor used. After it may come reduction={...},
// need_replication={...}, permutation={...}, blocked_propagation={...} and the word
// custom. Every error is a *sharding.FieldError on field carrying the character offset.
// ParseRule never panics.
func ParseRule(text, field string) (*Rule, error) {
	p := &ruleParser{s: text, field: field}
	r, err := p.parse()
	if err != nil {
		return nil, err
	}
	r.Custom = true
	return r, nil
}

type ruleParser struct {
	s     string
	pos   int
	field string
}

type rawDim struct {
	syms []string
	offs []int
}

func (p *ruleParser) fail(format string, args ...any) error {
	return sharding.Fieldf(p.field, "at offset %d: "+format, append([]any{p.pos}, args...)...)
}

func (p *ruleParser) failAt(off int, format string, args ...any) error {
	return sharding.Fieldf(p.field, "at offset %d: "+format, append([]any{off}, args...)...)
}

func (p *ruleParser) skip() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n' || p.s[p.pos] == '\r') {
		p.pos++
	}
}

func (p *ruleParser) peek() byte {
	p.skip()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *ruleParser) expect(c byte) error {
	if p.peek() != c {
		if p.pos >= len(p.s) {
			return p.fail("expected '%c', found the end", c)
		}
		return p.fail("expected '%c', found %q", c, p.s[p.pos])
	}
	p.pos++
	return nil
}

// symbol reads one factor symbol at the current position (no space skipping).
func (p *ruleParser) symbol() (string, bool) {
	if p.pos >= len(p.s) || p.s[p.pos] < 'a' || p.s[p.pos] > 'z' {
		return "", false
	}
	start := p.pos
	p.pos++
	if p.pos+1 < len(p.s) && p.s[p.pos] == '_' && p.s[p.pos+1] >= '0' && p.s[p.pos+1] <= '9' {
		p.pos++
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' && p.pos-start < 12 {
			p.pos++
		}
	}
	return p.s[start:p.pos], true
}

// tensors reads a parenthesized list of tensors, each a bracketed list of dims.
func (p *ruleParser) tensors() ([][]rawDim, error) {
	if err := p.expect('('); err != nil {
		return nil, err
	}
	var out [][]rawDim
	if p.peek() == ')' {
		p.pos++
		return out, nil
	}
	for {
		if err := p.expect('['); err != nil {
			return nil, err
		}
		dims, err := p.dims()
		if err != nil {
			return nil, err
		}
		out = append(out, dims)
		if len(out) > maxRuleFactors {
			return nil, p.fail("too many tensors")
		}
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect(')'); err != nil {
			return nil, p.fail("expected ',' or ')' after a tensor")
		}
		return out, nil
	}
}

// dims reads the dims of one tensor after its '[', through the closing ']'.
func (p *ruleParser) dims() ([]rawDim, error) {
	var dims []rawDim
	if p.peek() == ']' {
		p.pos++
		return dims, nil
	}
	for {
		p.skip()
		var d rawDim
		for {
			off := p.pos
			sym, ok := p.symbol()
			if !ok {
				break
			}
			d.syms = append(d.syms, sym)
			d.offs = append(d.offs, off)
		}
		if len(d.syms) == 0 {
			return nil, p.fail("expected a factor symbol (a lower-case letter, optionally _N)")
		}
		dims = append(dims, d)
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect(']'); err != nil {
			return nil, p.fail("expected ',' or ']' after a dim's factors")
		}
		return dims, nil
	}
}

func (p *ruleParser) word() string {
	p.skip()
	start := p.pos
	for p.pos < len(p.s) && (p.s[p.pos] == '_' || (p.s[p.pos] >= 'a' && p.s[p.pos] <= 'z')) {
		p.pos++
	}
	return p.s[start:p.pos]
}

// parse reads a whole rule: operands -> results, the sizes block, then the optional
// factor sets.
func (p *ruleParser) parse() (*Rule, error) {
	ops, err := p.tensors()
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.pos+1 >= len(p.s) || p.s[p.pos] != '-' || p.s[p.pos+1] != '>' {
		return nil, p.fail("expected \"->\" between operands and results")
	}
	p.pos += 2
	res, err := p.tensors()
	if err != nil {
		return nil, err
	}
	index, sizes, err := p.sizes()
	if err != nil {
		return nil, err
	}
	r := &Rule{FactorSizes: sizes, Types: make([]FactorType, len(sizes)), Blocked: make([]bool, len(sizes))}
	if r.Operands, err = p.factorDims(ops, index); err != nil {
		return nil, err
	}
	if r.Results, err = p.factorDims(res, index); err != nil {
		return nil, err
	}
	if err := p.factorSets(r, index); err != nil {
		return nil, err
	}
	return r, nil
}

// sizes reads the factor sizes block, {i=8, j=16}: the index of each symbol and the
// sizes in declaration order.
func (p *ruleParser) sizes() (map[string]int, []int64, error) {
	if err := p.expect('{'); err != nil {
		return nil, nil, p.fail("expected the factor sizes block, e.g. {i=8, j=16}")
	}
	index := map[string]int{}
	var sizes []int64
	if p.peek() == '}' {
		p.pos++
		return index, sizes, nil
	}
	for {
		p.skip()
		off := p.pos
		sym, ok := p.symbol()
		if !ok {
			return nil, nil, p.fail("expected a factor symbol in the sizes block")
		}
		if _, dup := index[sym]; dup {
			return nil, nil, p.failAt(off, "factor %s is declared twice", sym)
		}
		if err := p.expect('='); err != nil {
			return nil, nil, err
		}
		p.skip()
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
		if err != nil || n < 1 || n > 1<<40 {
			p.pos = start
			return nil, nil, p.fail("factor %s needs a size between 1 and 2^40", sym)
		}
		index[sym] = len(sizes)
		sizes = append(sizes, n)
		if len(sizes) > maxRuleFactors {
			return nil, nil, p.failAt(off, "more than %d factors", maxRuleFactors)
		}
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect('}'); err != nil {
			return nil, nil, p.fail("expected ',' or '}' in the sizes block")
		}
		return index, sizes, nil
	}
}

// factorDims turns the symbols of ts into factor indices; a symbol must be declared
// and appear once per tensor.
func (p *ruleParser) factorDims(ts [][]rawDim, index map[string]int) ([][][]int, error) {
	out := make([][][]int, len(ts))
	for t, dims := range ts {
		out[t] = make([][]int, len(dims))
		seen := map[int]bool{}
		for d, rd := range dims {
			for k, sym := range rd.syms {
				f, ok := index[sym]
				if !ok {
					return nil, p.failAt(rd.offs[k], "factor %s is used but not declared in the sizes block", sym)
				}
				if seen[f] {
					return nil, p.failAt(rd.offs[k], "factor %s appears twice in one tensor", sym)
				}
				seen[f] = true
				out[t][d] = append(out[t][d], f)
			}
		}
	}
	return out, nil
}

// factorSets reads the optional sets after the sizes block (reduction={...} and the
// like, or the word custom) into r.
func (p *ruleParser) factorSets(r *Rule, index map[string]int) error {
	for p.peek() != 0 {
		off := p.pos
		w := p.word()
		if w == "custom" {
			continue
		}
		var set func(f int) error
		switch w {
		case "reduction", "need_replication", "permutation":
			t := map[string]FactorType{"reduction": FactorReduction, "need_replication": FactorNeedReplication, "permutation": FactorPermutation}[w]
			set = func(f int) error {
				if r.Types[f] != FactorPassThrough && r.Types[f] != t {
					return p.fail("factor %s is already %s; a factor has one type", FactorName(f), r.Types[f])
				}
				r.Types[f] = t
				return nil
			}
		case "blocked_propagation":
			set = func(f int) error { r.Blocked[f] = true; return nil }
		default:
			p.pos = off
			return p.fail("expected reduction={...}, need_replication={...}, permutation={...}, blocked_propagation={...} or custom")
		}
		if err := p.factorSet(index, set); err != nil {
			return err
		}
	}
	return nil
}

// factorSet reads ={sym, ...} and calls set on each factor.
func (p *ruleParser) factorSet(index map[string]int, set func(f int) error) error {
	if err := p.expect('='); err != nil {
		return err
	}
	if err := p.expect('{'); err != nil {
		return err
	}
	if p.peek() == '}' {
		p.pos++
		return nil
	}
	for {
		p.skip()
		sym, ok := p.symbol()
		if !ok {
			return p.fail("expected a factor symbol")
		}
		f, ok := index[sym]
		if !ok {
			return p.fail("factor %s is not declared in the sizes block", sym)
		}
		if err := set(f); err != nil {
			return err
		}
		if p.peek() == ',' {
			p.pos++
			continue
		}
		return p.expect('}')
	}
}

// checkShapes verifies that a rule fits the op's tensors: as many operands and results,
// equal ranks, and per dim a product of factor sizes equal to the dim size. Errors name
// field.
func (r *Rule) checkShapes(operands, results [][]int64, field string) error {
	if len(r.Operands) != len(operands) || len(r.Results) != len(results) {
		return sharding.Fieldf(field, "the rule has %d operands and %d results but the op has %d and %d", len(r.Operands), len(r.Results), len(operands), len(results))
	}
	for t := range r.NumTensors() {
		var shape []int64
		what := "operand"
		idx := t
		if t < len(operands) {
			shape = operands[t]
		} else {
			shape, what, idx = results[t-len(operands)], "result", t-len(operands)
		}
		dims := r.Dims(t)
		if len(dims) != len(shape) {
			return sharding.Fieldf(field, "%s %d has rank %d but the rule gives it %d dims", what, idx, len(shape), len(dims))
		}
		for d, fs := range dims {
			p := int64(1)
			for _, f := range fs {
				p *= r.FactorSizes[f]
				if p > 1<<62 {
					break
				}
			}
			if p != shape[d] {
				return sharding.Fieldf(field, "%s %d dim %d has size %d but its factors multiply to %d", what, idx, d, shape[d], p)
			}
		}
	}
	for f := range r.FactorSizes {
		used := false
		for t := 0; t < r.NumTensors() && !used; t++ {
			used = r.hasFactor(t, f)
		}
		if !used {
			return sharding.Fieldf(field, "factor %s is declared but no tensor maps it", FactorName(f))
		}
	}
	return nil
}
