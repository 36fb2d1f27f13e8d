package propagation

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// opClass groups ops by how the op-priority schedule treats them.
type opClass uint8

const (
	classOther       opClass = iota
	classElementwise         // elementwise ops and sharding_constraint
	classPassThrough         // reshape, transpose, data-flow edges
	classDynSlice            // dynamic_slice: forward only in the first stages
	classBroadcast           // broadcast_in_dim: backward only until the last stage
	classNoRule              // constant, iota, while, opaque: nothing propagates through them
)

var unaryOps = []string{
	"abs", "cbrt", "ceil", "convert", "copy", "cosine", "count_leading_zeros", "erf",
	"exponential", "exponential_minus_one", "floor", "imag", "is_finite", "log",
	"log_plus_one", "logistic", "negate", "not", "popcnt", "real", "reduce_precision",
	"round_nearest_afz", "round_nearest_even", "rsqrt", "sign", "sine", "sqrt", "tan", "tanh",
	"exp", "neg",
}

var binaryOps = []string{
	"add", "and", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply",
	"or", "power", "remainder", "shift_left", "shift_right_arithmetic", "shift_right_logical",
	"subtract", "xor", "sub", "mul", "div", "max", "min", "pow",
}

// otherOps are the non-elementwise ops with a builder (or no rule).
var otherOps = []string{
	"broadcast_in_dim", "clamp", "concatenate", "constant", "convolution", "custom", "dot",
	"dot_general", "dynamic_slice", "einsum", "gather", "iota", "opaque", "pad", "reduce", "reshape",
	"reverse", "scatter", "select", "sharding_constraint", "slice", "transpose", "while",
}

var arity = func() map[string]int {
	m := map[string]int{}
	for _, k := range unaryOps {
		m[k] = 1
	}
	for _, k := range binaryOps {
		m[k] = 2
	}
	return m
}()

// SupportedOps lists every op kind the graph accepts, sorted.
func SupportedOps() []string {
	out := slices.Concat(unaryOps, binaryOps, otherOps)
	sort.Strings(out)
	return slices.Compact(out)
}

// buildRule validates op against the shapes of its operands and results and returns
// its sharding rule (nil for ops without one) and class. field is the op's wire path
// ("ops[3]"); errors name the offending attribute under it.
func buildRule(op *Op, field string, in, out [][]int64) (*Rule, opClass, error) {
	a := attrs{m: op.Attrs, field: field + ".attrs", op: op}
	fail := func(sub, format string, args ...any) error {
		f := field
		if sub != "" {
			f += "." + sub
		}
		return sharding.Fieldf(f, "op %q (%s): "+format, append([]any{op.Name, op.Kind}, args...)...)
	}
	needCounts := func(nIn, nOut int) error {
		if nIn >= 0 && len(in) != nIn {
			return fail("operands", "takes %d operands, got %d", nIn, len(in))
		}
		if nOut >= 0 && len(out) != nOut {
			return fail("results", "produces %d results, got %d", nOut, len(out))
		}
		return nil
	}
	if n, ok := arity[op.Kind]; ok {
		if err := needCounts(n, 1); err != nil {
			return nil, 0, err
		}
		r, err := elementwiseRule(in, out[0], nil, fail)
		return r, classElementwise, err
	}
	switch op.Kind {
	case "sharding_constraint":
		if err := needCounts(1, 1); err != nil {
			return nil, 0, err
		}
		r, err := elementwiseRule(in, out[0], nil, fail)
		return r, classElementwise, err
	case "select", "clamp":
		if err := needCounts(3, 1); err != nil {
			return nil, 0, err
		}
		scalarOK := map[int]bool{0: true}
		if op.Kind == "clamp" {
			scalarOK[2] = true
		}
		r, err := elementwiseRule(in, out[0], scalarOK, fail)
		return r, classElementwise, err
	case "opaque":
		// An op shardplan does not model (imported modules): a barrier with any
		// operands and results.
		return nil, classNoRule, nil
	case "constant":
		if err := needCounts(0, 1); err != nil {
			return nil, 0, err
		}
		return nil, classNoRule, nil
	case "iota":
		if err := needCounts(0, 1); err != nil {
			return nil, 0, err
		}
		d, err := a.int("iota_dimension", 0)
		if err != nil {
			return nil, 0, err
		}
		if d < 0 || (len(out[0]) > 0 && d >= int64(len(out[0]))) {
			return nil, 0, a.errf("iota_dimension", "dim %d is out of range for rank %d", d, len(out[0]))
		}
		return nil, classNoRule, nil
	case "dot_general", "dot":
		if err := needCounts(2, 1); err != nil {
			return nil, 0, err
		}
		r, err := dotRule(op.Kind, a, in[0], in[1], out[0])
		return r, classOther, err
	case "einsum":
		if err := needCounts(-1, 1); err != nil {
			return nil, 0, err
		}
		eq, ok, err := a.str("equation")
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, 0, a.errf("equation", "is required, e.g. \"bij,bjk->bik\"")
		}
		e, err := ParseEinsum(eq, a.field+".equation")
		if err != nil {
			return nil, 0, err
		}
		r, err := e.rule(in, out[0], a.field+".equation")
		return r, classOther, err
	case "broadcast_in_dim":
		if err := needCounts(1, 1); err != nil {
			return nil, 0, err
		}
		r, err := broadcastRule(a, in[0], out[0])
		return r, classBroadcast, err
	case "reshape":
		if err := needCounts(1, 1); err != nil {
			return nil, 0, err
		}
		ni, no := numElements(in[0]), numElements(out[0])
		if ni != no {
			return nil, 0, fail("results[0]", "reshape from %v (%d elements) to %v (%d elements) changes the element count", in[0], ni, out[0], no)
		}
		if ni == 0 {
			return nil, classNoRule, nil
		}
		return reshapeRule(in[0], out[0]), classPassThrough, nil
	case "transpose":
		if err := needCounts(1, 1); err != nil {
			return nil, 0, err
		}
		r, err := transposeRule(a, in[0], out[0])
		return r, classPassThrough, err
	case "reduce":
		r, err := reduceRule(a, in, out, fail)
		return r, classOther, err
	case "concatenate":
		if len(in) == 0 {
			return nil, 0, fail("operands", "needs at least one operand")
		}
		if err := needCounts(-1, 1); err != nil {
			return nil, 0, err
		}
		r, err := concatRule(a, in, out[0])
		return r, classOther, err
	case "slice":
		if err := needCounts(1, 1); err != nil {
			return nil, 0, err
		}
		r, err := sliceRule(a, in[0], out[0])
		return r, classOther, err
	case "dynamic_slice":
		if len(in) == 0 {
			return nil, 0, fail("operands", "needs the operand and its start indices")
		}
		if err := needCounts(-1, 1); err != nil {
			return nil, 0, err
		}
		r, err := dynamicSliceRule(a, in, out[0])
		return r, classDynSlice, err
	case "pad":
		if len(in) != 1 && len(in) != 2 {
			return nil, 0, fail("operands", "takes the operand and an optional scalar padding value, got %d operands", len(in))
		}
		if err := needCounts(-1, 1); err != nil {
			return nil, 0, err
		}
		r, err := padRule(a, in, out[0])
		return r, classOther, err
	case "reverse":
		if err := needCounts(1, 1); err != nil {
			return nil, 0, err
		}
		if !slices.Equal(in[0], out[0]) {
			return nil, 0, fail("results[0]", "result shape %v differs from operand shape %v", out[0], in[0])
		}
		dims, err := a.dimList("dimensions", len(in[0]), true)
		if err != nil {
			return nil, 0, err
		}
		r := newRule([]int{len(in[0])}, []int{len(out[0])})
		for d, n := range in[0] {
			t := FactorPassThrough
			if slices.Contains(dims, d) {
				t = FactorPermutation
			}
			f := r.addFactor(n, t)
			r.mapDim(0, d, f)
			r.mapDim(1, d, f)
		}
		return r.finish(), classOther, nil
	case "gather":
		if err := needCounts(2, 1); err != nil {
			return nil, 0, err
		}
		r, err := gatherRule(a, in[0], in[1], out[0])
		return r, classOther, err
	case "scatter":
		r, err := scatterRule(a, in, out, fail)
		return r, classOther, err
	case "convolution":
		if err := needCounts(2, 1); err != nil {
			return nil, 0, err
		}
		r, err := convRule(a, in[0], in[1], out[0])
		return r, classOther, err
	case "custom":
		if op.Rule == "" {
			return nil, 0, fail("rule", "is required for a custom op, e.g. \"([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}\"")
		}
		r, err := ParseRule(op.Rule, field+".rule")
		if err != nil {
			return nil, 0, err
		}
		if err := r.checkShapes(in, out, field+".rule"); err != nil {
			return nil, 0, err
		}
		return r, classOther, nil
	}
	return nil, 0, fail("op", "unknown op %q; supported ops: %s", op.Kind, strings.Join(SupportedOps(), ", "))
}

func numElements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func ranks(shapes [][]int64) []int {
	out := make([]int, len(shapes))
	for i, s := range shapes {
		out[i] = len(s)
	}
	return out
}

// elementwiseRule: ([i,j],[i,j])->([i,j]); operands in scalarOK may be scalars ([]).
func elementwiseRule(in [][]int64, res []int64, scalarOK map[int]bool, fail func(string, string, ...any) error) (*Rule, error) {
	for i, s := range in {
		if len(s) == 0 && scalarOK[i] {
			continue
		}
		if !slices.Equal(s, res) {
			return nil, fail("operands["+strconv.Itoa(i)+"]", "operand shape %v differs from the result shape %v", s, res)
		}
	}
	r := newRule(ranks(in), []int{len(res)})
	for d, n := range res {
		f := r.addFactor(n, FactorPassThrough)
		for i, s := range in {
			if len(s) > 0 || len(res) == 0 {
				r.mapDim(i, d, f)
			}
		}
		r.mapDim(len(in), d, f)
	}
	return r.finish(), nil
}

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

func concatRule(a attrs, in [][]int64, res []int64) (*Rule, error) {
	dim, err := a.int("dimension", -1)
	if err != nil {
		return nil, err
	}
	if dim < 0 || dim >= int64(len(res)) {
		return nil, a.errf("dimension", "dim %d is out of range for rank %d", dim, len(res))
	}
	var sum int64
	for i, s := range in {
		if len(s) != len(res) {
			return nil, a.errf("", "operand %d has rank %d but the result has rank %d", i, len(s), len(res))
		}
		for d := range s {
			if d != int(dim) && s[d] != res[d] {
				return nil, a.errf("", "operand %d dim %d has size %d but the result has %d", i, d, s[d], res[d])
			}
		}
		sum += s[dim]
	}
	if sum != res[dim] {
		return nil, a.errf("dimension", "operand sizes along dim %d add up to %d but the result has %d", dim, sum, res[dim])
	}
	r := newRule(ranks(in), []int{len(res)})
	for d, n := range res {
		t := FactorPassThrough
		if d == int(dim) {
			t = FactorNeedReplication
		}
		f := r.addFactor(n, t)
		for i := range in {
			r.mapDim(i, d, f)
		}
		r.mapDim(len(in), d, f)
	}
	return r.finish(), nil
}

func sliceRule(a attrs, in, res []int64) (*Rule, error) {
	start, err := a.ints("start_indices", true)
	if err != nil {
		return nil, err
	}
	limit, err := a.ints("limit_indices", true)
	if err != nil {
		return nil, err
	}
	strides, err := a.ints("strides", false)
	if err != nil {
		return nil, err
	}
	if strides == nil {
		strides = make([]int64, len(in))
		for i := range strides {
			strides[i] = 1
		}
	}
	for name, xs := range map[string][]int64{"start_indices": start, "limit_indices": limit, "strides": strides} {
		if len(xs) != len(in) {
			return nil, a.errf(name, "has %d entries but the operand has rank %d", len(xs), len(in))
		}
	}
	if len(res) != len(in) {
		return nil, a.errf("", "the result has rank %d but the operand %d", len(res), len(in))
	}
	r := newRule([]int{len(in)}, []int{len(res)})
	for d, n := range in {
		if start[d] < 0 || start[d] > limit[d] || limit[d] > n {
			return nil, a.errf("limit_indices["+strconv.Itoa(d)+"]", "need 0 <= start (%d) <= limit (%d) <= dim size (%d)", start[d], limit[d], n)
		}
		if strides[d] < 1 {
			return nil, a.errf("strides["+strconv.Itoa(d)+"]", "stride %d must be >= 1", strides[d])
		}
		if want := (limit[d] - start[d] + strides[d] - 1) / strides[d]; res[d] != want {
			return nil, a.errf("limit_indices["+strconv.Itoa(d)+"]", "result dim %d should have size %d, got %d", d, want, res[d])
		}
		t := FactorPassThrough
		if res[d] != n {
			t = FactorPermutation
		}
		f := r.addFactor(n, t)
		r.mapDim(0, d, f)
		r.mapDim(1, d, f)
	}
	return r.finish(), nil
}

func dynamicSliceRule(a attrs, in [][]int64, res []int64) (*Rule, error) {
	x := in[0]
	sizes, err := a.ints("slice_sizes", true)
	if err != nil {
		return nil, err
	}
	if len(sizes) != len(x) {
		return nil, a.errf("slice_sizes", "has %d entries but the operand has rank %d", len(sizes), len(x))
	}
	if !slices.Equal(sizes, res) {
		return nil, a.errf("slice_sizes", "the result shape %v should equal slice_sizes %v", res, sizes)
	}
	for i, s := range in[1:] {
		if len(s) > 1 {
			return nil, a.errf("", "start index operand %d must be a scalar or a vector, got shape %v", i+1, s)
		}
	}
	r := newRule(ranks(in), []int{len(res)})
	for d, n := range x {
		if sizes[d] < 0 || sizes[d] > n {
			return nil, a.errf("slice_sizes["+strconv.Itoa(d)+"]", "slice size %d exceeds dim size %d", sizes[d], n)
		}
		f := r.addFactor(n, FactorPassThrough)
		if sizes[d] != n {
			r.Types[f] = FactorNeedReplication
			r.Blocked[f] = true
		}
		r.mapDim(0, d, f)
		r.mapDim(len(in), d, f)
	}
	return r.finish(), nil
}

func padRule(a attrs, in [][]int64, res []int64) (*Rule, error) {
	x := in[0]
	if len(in) == 2 && len(in[1]) != 0 {
		return nil, a.errf("", "the padding value must be a scalar, got shape %v", in[1])
	}
	lo, err := a.ints("edge_padding_low", true)
	if err != nil {
		return nil, err
	}
	hi, err := a.ints("edge_padding_high", true)
	if err != nil {
		return nil, err
	}
	interior, err := a.ints("interior_padding", false)
	if err != nil {
		return nil, err
	}
	if interior == nil {
		interior = make([]int64, len(x))
	}
	for name, xs := range map[string][]int64{"edge_padding_low": lo, "edge_padding_high": hi, "interior_padding": interior} {
		if len(xs) != len(x) {
			return nil, a.errf(name, "has %d entries but the operand has rank %d", len(xs), len(x))
		}
	}
	if len(res) != len(x) {
		return nil, a.errf("", "the result has rank %d but the operand %d", len(res), len(x))
	}
	r := newRule(ranks(in), []int{len(res)})
	for d, n := range x {
		if interior[d] < 0 {
			return nil, a.errf("interior_padding["+strconv.Itoa(d)+"]", "must be >= 0")
		}
		want := lo[d] + hi[d] + n
		if n > 0 {
			want += (n - 1) * interior[d]
		}
		if want != res[d] {
			return nil, a.errf("edge_padding_high["+strconv.Itoa(d)+"]", "result dim %d should have size %d, got %d", d, want, res[d])
		}
		t := FactorPassThrough
		if lo[d] != 0 || hi[d] != 0 || interior[d] != 0 {
			t = FactorPermutation
		}
		f := r.addFactor(n, t)
		r.mapDim(0, d, f)
		r.mapDim(len(in), d, f)
	}
	return r.finish(), nil
}

// indexedDims are the dimension numbers gather and scatter share: the window dims of
// the result (gather) or updates (scatter), the operand dims dropped from the window,
// the batching dims of the operand and of the indices, the index vector dim, and the
// indices' dims other than it.
type indexedDims struct {
	window, dropped, operandBatch, indexBatch []int
	ivd                                       int
	indexDims                                 []int
}

// indexedDimNames are the StableHLO names of indexedDims' lists, in field order.
type indexedDimNames struct{ window, dropped, operandBatch, indexBatch string }

var (
	gatherDimNames  = indexedDimNames{"offset_dims", "collapsed_slice_dims", "operand_batching_dims", "start_indices_batching_dims"}
	scatterDimNames = indexedDimNames{"update_window_dims", "inserted_window_dims", "input_batching_dims", "scatter_indices_batching_dims"}
)

// readIndexedDims reads and checks the shared dimension numbers of a gather or scatter
// whose window tensor, operand and indices have the given ranks.
func readIndexedDims(d attrs, names indexedDimNames, windowRank, operandRank, idxRank int) (indexedDims, error) {
	var dn indexedDims
	var err error
	if dn.window, err = d.dimList(names.window, windowRank, false); err != nil {
		return dn, err
	}
	if dn.dropped, err = d.dimList(names.dropped, operandRank, false); err != nil {
		return dn, err
	}
	if dn.operandBatch, err = d.dimList(names.operandBatch, operandRank, false); err != nil {
		return dn, err
	}
	if dn.indexBatch, err = d.dimList(names.indexBatch, idxRank, false); err != nil {
		return dn, err
	}
	ivd, err := d.int("index_vector_dim", int64(idxRank))
	if err != nil {
		return dn, err
	}
	dn.ivd = int(ivd)
	if dn.ivd < 0 || dn.ivd > idxRank {
		return dn, d.errf("index_vector_dim", "dim %d is out of range for indices of rank %d", dn.ivd, idxRank)
	}
	if slices.Contains(dn.indexBatch, dn.ivd) {
		return dn, d.errf(names.indexBatch, "includes the index vector dim %d", dn.ivd)
	}
	if len(dn.operandBatch) != len(dn.indexBatch) {
		return dn, d.errf(names.indexBatch, "has %d dims but %s has %d", len(dn.indexBatch), names.operandBatch, len(dn.operandBatch))
	}
	for i := range idxRank {
		if i != dn.ivd {
			dn.indexDims = append(dn.indexDims, i)
		}
	}
	return dn, nil
}

func gatherRule(a attrs, x, idx, res []int64) (*Rule, error) {
	d := a.sub("dimension_numbers", "gather_dimension_numbers")
	dn, err := readIndexedDims(d, gatherDimNames, len(res), len(x), len(idx))
	if err != nil {
		return nil, err
	}
	offset, collapsed, opBatch, idxBatch, ivd := dn.window, dn.dropped, dn.operandBatch, dn.indexBatch, dn.ivd
	sizes, err := a.ints("slice_sizes", true)
	if err != nil {
		return nil, err
	}
	if len(sizes) != len(x) {
		return nil, a.errf("slice_sizes", "has %d entries but the operand has rank %d", len(sizes), len(x))
	}
	var offsetOperandDims []int
	for od := range x {
		if sizes[od] < 0 || sizes[od] > x[od] {
			return nil, a.errf("slice_sizes["+strconv.Itoa(od)+"]", "slice size %d exceeds operand dim size %d", sizes[od], x[od])
		}
		if slices.Contains(collapsed, od) || slices.Contains(opBatch, od) {
			if sizes[od] > 1 {
				return nil, a.errf("slice_sizes["+strconv.Itoa(od)+"]", "collapsed or batching dim %d must have slice size <= 1", od)
			}
			if slices.Contains(collapsed, od) && slices.Contains(opBatch, od) {
				return nil, d.errf("collapsed_slice_dims", "dim %d is also an operand batching dim", od)
			}
			continue
		}
		offsetOperandDims = append(offsetOperandDims, od)
	}
	if len(offsetOperandDims) != len(offset) {
		return nil, d.errf("offset_dims", "has %d dims but the operand has %d uncollapsed, non-batching dims", len(offset), len(offsetOperandDims))
	}
	batchIdxDims := dn.indexDims
	if len(res) != len(batchIdxDims)+len(offset) {
		return nil, a.errf("", "the result has rank %d but should have %d (%d batch + %d offset dims)", len(res), len(batchIdxDims)+len(offset), len(batchIdxDims), len(offset))
	}
	r := newRule([]int{len(x), len(idx)}, []int{len(res)})
	const xT, iT, rT = 0, 1, 2
	bi := 0
	sortedOffset := slices.Clone(offset)
	slices.Sort(sortedOffset)
	for rd := range res {
		if slices.Contains(offset, rd) {
			continue
		}
		id := batchIdxDims[bi]
		bi++
		if res[rd] != idx[id] {
			return nil, a.errf("", "result batch dim %d has size %d but indices dim %d has %d", rd, res[rd], id, idx[id])
		}
		f := r.addFactor(res[rd], FactorPassThrough)
		r.mapDim(iT, id, f)
		r.mapDim(rT, rd, f)
		if k := slices.Index(idxBatch, id); k >= 0 {
			if x[opBatch[k]] != idx[id] {
				return nil, d.errf("operand_batching_dims", "operand batching dim %d has size %d but indices dim %d has %d", opBatch[k], x[opBatch[k]], id, idx[id])
			}
			r.mapDim(xT, opBatch[k], f)
		}
	}
	for k, rd := range sortedOffset {
		od := offsetOperandDims[k]
		if res[rd] != sizes[od] {
			return nil, a.errf("slice_sizes["+strconv.Itoa(od)+"]", "result offset dim %d has size %d but the slice size is %d", rd, res[rd], sizes[od])
		}
		switch {
		case sizes[od] == x[od]:
			f := r.addFactor(x[od], FactorPassThrough)
			r.mapDim(xT, od, f)
			r.mapDim(rT, rd, f)
		case sizes[od] == 1:
			r.mapDim(xT, od, r.addFactor(x[od], FactorReduction))
			r.mapDim(rT, rd, r.addFactor(1, FactorNeedReplication))
		default:
			f := r.addFactor(x[od], FactorNeedReplication)
			r.Blocked[f] = true
			r.mapDim(xT, od, f)
			r.mapDim(rT, rd, f)
		}
	}
	for _, od := range collapsed {
		t := FactorReduction
		if x[od] == 1 {
			t = FactorNeedReplication
		}
		r.mapDim(xT, od, r.addFactor(x[od], t))
	}
	if ivd < len(idx) {
		r.mapDim(iT, ivd, r.addFactor(idx[ivd], FactorNeedReplication))
	}
	return r.finish(), nil
}

func scatterRule(a attrs, in, out [][]int64, fail func(string, string, ...any) error) (*Rule, error) {
	n := len(out)
	if n == 0 || len(in) != 2*n+1 {
		return nil, fail("operands", "takes N inputs, the scatter indices and N updates for N results; got %d operands and %d results", len(in), len(out))
	}
	x, idx := in[0], in[n]
	for i := range n {
		if !slices.Equal(in[i], x) || !slices.Equal(out[i], x) {
			return nil, fail("results["+strconv.Itoa(i)+"]", "inputs and results must share one shape %v", x)
		}
	}
	upd := in[n+1]
	for i := range n {
		if !slices.Equal(in[n+1+i], upd) {
			return nil, fail("operands["+strconv.Itoa(n+1+i)+"]", "all updates must share one shape %v", upd)
		}
	}
	d := a.sub("scatter_dimension_numbers", "dimension_numbers")
	dn, err := readIndexedDims(d, scatterDimNames, len(upd), len(x), len(idx))
	if err != nil {
		return nil, err
	}
	window, inserted, inBatch, idxBatch, ivd := dn.window, dn.dropped, dn.operandBatch, dn.indexBatch, dn.ivd
	var windowOperandDims []int
	for od := range x {
		if !slices.Contains(inserted, od) && !slices.Contains(inBatch, od) {
			windowOperandDims = append(windowOperandDims, od)
		}
	}
	if len(windowOperandDims) != len(window) {
		return nil, d.errf("update_window_dims", "has %d dims but the input has %d non-inserted, non-batching dims", len(window), len(windowOperandDims))
	}
	scatterIdxDims := dn.indexDims
	if len(upd) != len(window)+len(scatterIdxDims) {
		return nil, fail("operands["+strconv.Itoa(n+1)+"]", "updates have rank %d but should have %d (%d scatter + %d window dims)", len(upd), len(window)+len(scatterIdxDims), len(scatterIdxDims), len(window))
	}
	r := newRule(ranks(in), ranks(out))
	xf := make([]int, len(x))
	for od, s := range x {
		f := r.addFactor(s, FactorPassThrough)
		xf[od] = f
		for i := range n {
			r.mapDim(i, od, f)
			r.mapDim(len(in)+i, od, f)
		}
	}
	mapUpd := func(ud, f int) {
		for i := range n {
			r.mapDim(n+1+i, ud, f)
		}
	}
	si := 0
	sortedWindow := slices.Clone(window)
	slices.Sort(sortedWindow)
	for ud := range upd {
		if slices.Contains(window, ud) {
			continue
		}
		id := scatterIdxDims[si]
		si++
		if upd[ud] != idx[id] {
			return nil, fail("operands["+strconv.Itoa(n+1)+"]", "update scatter dim %d has size %d but indices dim %d has %d", ud, upd[ud], id, idx[id])
		}
		if k := slices.Index(idxBatch, id); k >= 0 {
			f := xf[inBatch[k]]
			if x[inBatch[k]] != idx[id] {
				return nil, d.errf("input_batching_dims", "input batching dim %d has size %d but indices dim %d has %d", inBatch[k], x[inBatch[k]], id, idx[id])
			}
			r.mapDim(n, id, f)
			mapUpd(ud, f)
			continue
		}
		f := r.addFactor(upd[ud], FactorReduction)
		r.mapDim(n, id, f)
		mapUpd(ud, f)
	}
	for k, ud := range sortedWindow {
		od := windowOperandDims[k]
		if upd[ud] > x[od] {
			return nil, fail("operands["+strconv.Itoa(n+1)+"]", "update window dim %d (size %d) exceeds input dim %d (size %d)", ud, upd[ud], od, x[od])
		}
		if upd[ud] == x[od] {
			mapUpd(ud, xf[od])
			continue
		}
		r.Types[xf[od]] = FactorNeedReplication
		mapUpd(ud, r.addFactor(upd[ud], FactorNeedReplication))
	}
	if ivd < len(idx) {
		r.mapDim(n, ivd, r.addFactor(idx[ivd], FactorNeedReplication))
	}
	return r.finish(), nil
}

func convRule(a attrs, x, k, res []int64) (*Rule, error) {
	dn := a.sub("dimension_numbers")
	n := len(x)
	if len(k) != n || len(res) != n || n < 2 {
		return nil, a.errf("", "input, kernel and result must share a rank >= 2, got %d, %d and %d", n, len(k), len(res))
	}
	one := func(name string, rank int) (int, error) {
		v, err := dn.int(name, -1)
		if err != nil {
			return 0, err
		}
		if v < 0 || v >= int64(rank) {
			return 0, dn.errf(name, "is required and must be a dim in 0..%d", rank-1)
		}
		return int(v), nil
	}
	var err error
	var ib, ifeat, kin, kout, ob, of int
	if ib, err = one("input_batch_dimension", n); err != nil {
		return nil, err
	}
	if ifeat, err = one("input_feature_dimension", n); err != nil {
		return nil, err
	}
	if kin, err = one("kernel_input_feature_dimension", n); err != nil {
		return nil, err
	}
	if kout, err = one("kernel_output_feature_dimension", n); err != nil {
		return nil, err
	}
	if ob, err = one("output_batch_dimension", n); err != nil {
		return nil, err
	}
	if of, err = one("output_feature_dimension", n); err != nil {
		return nil, err
	}
	is, err := dn.dimList("input_spatial_dimensions", n, true)
	if err != nil {
		return nil, err
	}
	ks, err := dn.dimList("kernel_spatial_dimensions", n, true)
	if err != nil {
		return nil, err
	}
	os, err := dn.dimList("output_spatial_dimensions", n, true)
	if err != nil {
		return nil, err
	}
	if len(is) != n-2 || len(ks) != n-2 || len(os) != n-2 {
		return nil, dn.errf("input_spatial_dimensions", "input, kernel and output need %d spatial dims each", n-2)
	}
	distinct := func(name string, ds ...int) error {
		seen := map[int]bool{}
		for _, d := range ds {
			if seen[d] {
				return dn.errf(name, "dim %d is used twice", d)
			}
			seen[d] = true
		}
		return nil
	}
	if err := distinct("input_spatial_dimensions", append([]int{ib, ifeat}, is...)...); err != nil {
		return nil, err
	}
	if err := distinct("kernel_spatial_dimensions", append([]int{kin, kout}, ks...)...); err != nil {
		return nil, err
	}
	if err := distinct("output_spatial_dimensions", append([]int{ob, of}, os...)...); err != nil {
		return nil, err
	}
	fgc, err := a.int("feature_group_count", 1)
	if err != nil {
		return nil, err
	}
	bgc, err := a.int("batch_group_count", 1)
	if err != nil {
		return nil, err
	}
	if fgc < 1 || bgc < 1 {
		return nil, a.errf("feature_group_count", "group counts must be >= 1")
	}
	if k[kin]*fgc != x[ifeat] {
		return nil, dn.errf("kernel_input_feature_dimension", "kernel input features (%d) x feature_group_count (%d) must equal input features (%d)", k[kin], fgc, x[ifeat])
	}
	if res[of] != k[kout] {
		return nil, dn.errf("output_feature_dimension", "output features (%d) must equal kernel output features (%d)", res[of], k[kout])
	}
	if res[ob]*bgc != x[ib] {
		return nil, dn.errf("output_batch_dimension", "output batch (%d) x batch_group_count (%d) must equal input batch (%d)", res[ob], bgc, x[ib])
	}
	strides, err := a.ints("window_strides", false)
	if err != nil {
		return nil, err
	}
	lhsDil, err := a.ints("lhs_dilation", false)
	if err != nil {
		return nil, err
	}
	rhsDil, err := a.ints("rhs_dilation", false)
	if err != nil {
		return nil, err
	}
	pad, err := convPadding(a, n-2)
	if err != nil {
		return nil, err
	}
	at := func(xs []int64, i int) int64 {
		if i < len(xs) && xs[i] > 0 {
			return xs[i]
		}
		return 1
	}
	r := newRule([]int{n, n}, []int{n})
	const xT, kT, rT = 0, 1, 2
	if x[ib] == res[ob] {
		f := r.addFactor(res[ob], FactorPassThrough)
		r.mapDim(xT, ib, f)
		r.mapDim(rT, ob, f)
	} else {
		r.mapDim(xT, ib, r.addFactor(x[ib], FactorNeedReplication))
		r.mapDim(rT, ob, r.addFactor(res[ob], FactorNeedReplication))
	}
	fo := r.addFactor(res[of], FactorPassThrough)
	r.mapDim(kT, kout, fo)
	r.mapDim(rT, of, fo)
	if fgc == 1 {
		f := r.addFactor(x[ifeat], FactorReduction)
		r.mapDim(xT, ifeat, f)
		r.mapDim(kT, kin, f)
	} else {
		r.mapDim(xT, ifeat, r.addFactor(x[ifeat], FactorNeedReplication))
		r.mapDim(kT, kin, r.addFactor(k[kin], FactorNeedReplication))
	}
	for i := range n - 2 {
		in, kw, o := x[is[i]], k[ks[i]], res[os[i]]
		s := at(strides, i)
		dilIn := (in-1)*at(lhsDil, i) + 1
		dilK := (kw-1)*at(rhsDil, i) + 1
		span := dilIn + pad[i][0] + pad[i][1] - dilK
		want := int64(0)
		if in > 0 && span >= 0 {
			want = span/s + 1
		}
		if want != o {
			return nil, dn.errf("output_spatial_dimensions["+strconv.Itoa(i)+"]", "output spatial dim %d should have size %d (input %d, window %d, stride %d, padding %v), got %d", os[i], want, in, kw, s, pad[i], o)
		}
		if in == o && kw == 1 {
			f := r.addFactor(o, FactorPassThrough)
			r.mapDim(xT, is[i], f)
			r.mapDim(rT, os[i], f)
			continue
		}
		fw := r.addFactor(o, FactorPermutation)
		r.mapDim(rT, os[i], fw)
		if kw == 1 {
			r.mapDim(xT, is[i], fw)
			continue
		}
		fk := r.addFactor(kw, FactorReduction)
		r.mapDim(kT, ks[i], fk)
		if o >= kw {
			r.mapDim(xT, is[i], fw)
			r.mapDim(xT, is[i], fk)
		} else {
			r.mapDim(xT, is[i], fk)
			r.mapDim(xT, is[i], fw)
		}
	}
	return r.finish(), nil
}

// convPadding reads padding as [[lo, hi], ...] or a flat [lo0, hi0, lo1, hi1, ...].
func convPadding(a attrs, spatial int) ([][2]int64, error) {
	out := make([][2]int64, spatial)
	v, ok := a.m["padding"]
	if !ok || v == nil {
		return out, nil
	}
	if rows, ok := v.([]any); ok && len(rows) > 0 {
		if _, nested := rows[0].([]any); nested {
			if len(rows) != spatial {
				return nil, a.errf("padding", "has %d rows but there are %d spatial dims", len(rows), spatial)
			}
			for i, row := range rows {
				pr, ok := row.([]any)
				if !ok || len(pr) != 2 {
					return nil, a.errf("padding["+strconv.Itoa(i)+"]", "must be [low, high]")
				}
				for j := range 2 {
					n, ok := toInt(pr[j])
					if !ok {
						return nil, a.errf("padding["+strconv.Itoa(i)+"]", "must be [low, high] integers")
					}
					out[i][j] = n
				}
			}
			return out, nil
		}
	}
	if rows, ok := v.([][]int64); ok {
		if len(rows) != spatial {
			return nil, a.errf("padding", "has %d rows but there are %d spatial dims", len(rows), spatial)
		}
		for i, row := range rows {
			if len(row) != 2 {
				return nil, a.errf("padding["+strconv.Itoa(i)+"]", "must be [low, high]")
			}
			out[i] = [2]int64{row[0], row[1]}
		}
		return out, nil
	}
	flat, err := a.ints("padding", false)
	if err != nil {
		return nil, err
	}
	if len(flat) != 2*spatial {
		return nil, a.errf("padding", "has %d entries but needs %d ([low, high] per spatial dim)", len(flat), 2*spatial)
	}
	for i := range spatial {
		out[i] = [2]int64{flat[2*i], flat[2*i+1]}
	}
	return out, nil
}
