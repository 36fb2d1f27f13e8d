package propagation

import (
	"slices"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

func dotRule(kind string, a attrs, lhs, rhs, res []int64) (*Rule, error) {
	var lb, rb, lc, rc []int
	var err error
	if kind == "dot" {
		if len(lhs) < 1 || len(lhs) > 2 || len(rhs) < 1 || len(rhs) > 2 {
			return nil, a.errf("", "dot takes vectors or matrices, got ranks %d and %d", len(lhs), len(rhs))
		}
		lc, rc = []int{len(lhs) - 1}, []int{0}
	} else {
		d := a.sub("dot_dimension_numbers", "dimension_numbers")
		if lb, err = d.dimList("lhs_batching_dimensions", len(lhs), false); err != nil {
			return nil, err
		}
		if rb, err = d.dimList("rhs_batching_dimensions", len(rhs), false); err != nil {
			return nil, err
		}
		if lc, err = d.dimList("lhs_contracting_dimensions", len(lhs), false); err != nil {
			return nil, err
		}
		if rc, err = d.dimList("rhs_contracting_dimensions", len(rhs), false); err != nil {
			return nil, err
		}
		if len(lb) != len(rb) {
			return nil, d.errf("rhs_batching_dimensions", "has %d dims but lhs_batching_dimensions has %d", len(rb), len(lb))
		}
		if len(lc) != len(rc) {
			return nil, d.errf("rhs_contracting_dimensions", "has %d dims but lhs_contracting_dimensions has %d", len(rc), len(lc))
		}
		for i := range lb {
			if slices.Contains(lc, lb[i]) {
				return nil, d.errf("lhs_contracting_dimensions", "dim %d is also a batching dim", lb[i])
			}
			if slices.Contains(rc, rb[i]) {
				return nil, d.errf("rhs_contracting_dimensions", "dim %d is also a batching dim", rb[i])
			}
			if lhs[lb[i]] != rhs[rb[i]] {
				return nil, d.errf("rhs_batching_dimensions["+strconv.Itoa(i)+"]", "batching sizes differ: lhs dim %d has %d, rhs dim %d has %d", lb[i], lhs[lb[i]], rb[i], rhs[rb[i]])
			}
		}
		a = d
	}
	for i := range lc {
		if lhs[lc[i]] != rhs[rc[i]] {
			return nil, a.errf("rhs_contracting_dimensions["+strconv.Itoa(i)+"]", "contracting sizes differ: lhs dim %d has %d, rhs dim %d has %d", lc[i], lhs[lc[i]], rc[i], rhs[rc[i]])
		}
	}
	var lfree, rfree []int
	for d := range lhs {
		if !slices.Contains(lb, d) && !slices.Contains(lc, d) {
			lfree = append(lfree, d)
		}
	}
	for d := range rhs {
		if !slices.Contains(rb, d) && !slices.Contains(rc, d) {
			rfree = append(rfree, d)
		}
	}
	want := make([]int64, 0, len(lb)+len(lfree)+len(rfree))
	for _, d := range lb {
		want = append(want, lhs[d])
	}
	for _, d := range lfree {
		want = append(want, lhs[d])
	}
	for _, d := range rfree {
		want = append(want, rhs[d])
	}
	if !slices.Equal(want, res) {
		return nil, sharding.Fieldf(strings.TrimSuffix(a.field, ".attrs")+".results[0]", "op %q (%s): result shape %v does not match the operands (expected %v: batch, lhs free, rhs free dims)", a.op.Name, a.op.Kind, res, want)
	}
	r := newRule([]int{len(lhs), len(rhs)}, []int{len(res)})
	rd := 0
	for i := range lb {
		f := r.addFactor(lhs[lb[i]], FactorPassThrough)
		r.mapDim(0, lb[i], f)
		r.mapDim(1, rb[i], f)
		r.mapDim(2, rd, f)
		rd++
	}
	for _, d := range lfree {
		f := r.addFactor(lhs[d], FactorPassThrough)
		r.mapDim(0, d, f)
		r.mapDim(2, rd, f)
		rd++
	}
	for _, d := range rfree {
		f := r.addFactor(rhs[d], FactorPassThrough)
		r.mapDim(1, d, f)
		r.mapDim(2, rd, f)
		rd++
	}
	for i := range lc {
		f := r.addFactor(lhs[lc[i]], FactorReduction)
		r.mapDim(0, lc[i], f)
		r.mapDim(1, rc[i], f)
	}
	return r.finish(), nil
}

func broadcastRule(a attrs, in, res []int64) (*Rule, error) {
	dims, err := a.dimList("broadcast_dimensions", len(res), true)
	if err != nil {
		return nil, err
	}
	if len(dims) != len(in) {
		return nil, a.errf("broadcast_dimensions", "has %d entries but the operand has rank %d", len(dims), len(in))
	}
	opDim := make([]int, len(res))
	for i := range opDim {
		opDim[i] = -1
	}
	for i, d := range dims {
		if in[i] != res[d] && in[i] != 1 {
			return nil, a.errf("broadcast_dimensions["+strconv.Itoa(i)+"]", "operand dim %d (size %d) cannot broadcast to result dim %d (size %d); sizes must match or the operand's be 1", i, in[i], d, res[d])
		}
		opDim[d] = i
	}
	r := newRule([]int{len(in)}, []int{len(res)})
	for d, n := range res {
		i := opDim[d]
		if i >= 0 && in[i] == n {
			f := r.addFactor(n, FactorPassThrough)
			r.mapDim(0, i, f)
			r.mapDim(1, d, f)
			continue
		}
		if i >= 0 {
			r.mapDim(0, i, r.addFactor(1, FactorPassThrough))
		}
		r.mapDim(1, d, r.addFactor(n, FactorPassThrough))
	}
	return r.finish(), nil
}

func transposeRule(a attrs, in, res []int64) (*Rule, error) {
	perm, err := a.dimList("permutation", len(in), true)
	if err != nil {
		return nil, err
	}
	if len(perm) != len(in) {
		return nil, a.errf("permutation", "has %d entries but the operand has rank %d; give a permutation of 0..%d", len(perm), len(in), len(in)-1)
	}
	r := newRule([]int{len(in)}, []int{len(res)})
	if len(res) != len(in) {
		return nil, a.errf("permutation", "the result has rank %d but the operand %d", len(res), len(in))
	}
	for d, p := range perm {
		if res[d] != in[p] {
			return nil, a.errf("permutation", "result dim %d has size %d but operand dim %d (permutation[%d]) has %d", d, res[d], p, d, in[p])
		}
		f := r.addFactor(res[d], FactorPassThrough)
		r.mapDim(0, p, f)
		r.mapDim(1, d, f)
	}
	return r.finish(), nil
}

func reduceRule(a attrs, in, out [][]int64, fail func(string, string, ...any) error) (*Rule, error) {
	if len(out) == 0 {
		return nil, fail("results", "needs at least one result")
	}
	n := len(out)
	inputs := in
	switch len(in) {
	case n:
	case 2 * n:
		inputs = in[:n]
		for i, s := range in[n:] {
			if len(s) != 0 {
				return nil, fail("operands["+strconv.Itoa(n+i)+"]", "init values must be scalars, got shape %v", s)
			}
		}
	default:
		return nil, fail("operands", "takes %d inputs (and optionally %d scalar init values) for %d results, got %d operands", n, n, n, len(in))
	}
	shape := inputs[0]
	for i, s := range inputs {
		if !slices.Equal(s, shape) {
			return nil, fail("operands["+strconv.Itoa(i)+"]", "all inputs must have one shape; %v differs from %v", s, shape)
		}
	}
	dims, err := a.dimList("dimensions", len(shape), true)
	if err != nil {
		return nil, err
	}
	var want []int64
	for d, s := range shape {
		if !slices.Contains(dims, d) {
			want = append(want, s)
		}
	}
	for i, s := range out {
		if !slices.Equal(s, want) {
			return nil, fail("results["+strconv.Itoa(i)+"]", "result shape %v should be %v (the input without dims %v)", s, want, dims)
		}
	}
	r := newRule(ranks(in), ranks(out))
	rd := 0
	for d, s := range shape {
		t := FactorPassThrough
		if slices.Contains(dims, d) {
			t = FactorReduction
		}
		f := r.addFactor(s, t)
		for i := range inputs {
			r.mapDim(i, d, f)
		}
		if t == FactorPassThrough {
			for i := range out {
				r.mapDim(len(in)+i, rd, f)
			}
			rd++
		}
	}
	return r.finish(), nil
}
