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
	s := &opSig{op: op, field: field, a: attrs{m: op.Attrs, field: field + ".attrs", op: op}}
	if n, ok := arity[op.Kind]; ok {
		return s.elementwise(in, out, n, nil)
	}
	switch op.Kind {
	case "sharding_constraint":
		return s.elementwise(in, out, 1, nil)
	case "select":
		return s.elementwise(in, out, 3, map[int]bool{0: true})
	case "clamp":
		return s.elementwise(in, out, 3, map[int]bool{0: true, 2: true})
	case "opaque":
		// An op shardplan does not model (imported modules): a barrier with any
		// operands and results.
		return nil, classNoRule, nil
	case "constant":
		return s.constant(in, out)
	case "iota":
		return s.iota(in, out)
	case "dot_general", "dot":
		return s.dot(in, out)
	case "einsum":
		return s.einsum(in, out)
	case "broadcast_in_dim":
		return s.unary(in, out, classBroadcast, broadcastRule)
	case "reshape":
		return s.reshape(in, out)
	case "transpose":
		return s.unary(in, out, classPassThrough, transposeRule)
	case "reduce":
		r, err := reduceRule(s.a, in, out, s.fail)
		return r, classOther, err
	case "concatenate":
		return s.concatenate(in, out)
	case "slice":
		return s.unary(in, out, classOther, sliceRule)
	case "dynamic_slice":
		return s.dynamicSlice(in, out)
	case "pad":
		return s.pad(in, out)
	case "reverse":
		return s.reverse(in, out)
	case "gather":
		return s.binary(in, out, gatherRule)
	case "scatter":
		r, err := scatterRule(s.a, in, out, s.fail)
		return r, classOther, err
	case "convolution":
		return s.binary(in, out, convRule)
	case "custom":
		return s.custom(in, out)
	}
	return nil, 0, s.fail("op", "unknown op %q; supported ops: %s", op.Kind, strings.Join(SupportedOps(), ", "))
}

// opSig is an op as buildRule checks it; its methods take the shapes of the op's
// operands (in) and results (out).
type opSig struct {
	op    *Op
	field string // the op's wire path
	a     attrs
}

// fail is a field error under the op's path (sub names the part, "" the op itself).
func (s *opSig) fail(sub, format string, args ...any) error {
	f := s.field
	if sub != "" {
		f += "." + sub
	}
	return sharding.Fieldf(f, "op %q (%s): "+format, append([]any{s.op.Name, s.op.Kind}, args...)...)
}

// counts checks the numbers of operands and results (a negative count is not checked).
func (s *opSig) counts(in, out [][]int64, nIn, nOut int) error {
	if nIn >= 0 && len(in) != nIn {
		return s.fail("operands", "takes %d operands, got %d", nIn, len(in))
	}
	if nOut >= 0 && len(out) != nOut {
		return s.fail("results", "produces %d results, got %d", nOut, len(out))
	}
	return nil
}

// elementwise is an elementwise op of n operands; operands in scalarOK may be scalars.
func (s *opSig) elementwise(in, out [][]int64, n int, scalarOK map[int]bool) (*Rule, opClass, error) {
	if err := s.counts(in, out, n, 1); err != nil {
		return nil, 0, err
	}
	r, err := elementwiseRule(in, out[0], scalarOK, s.fail)
	return r, classElementwise, err
}

// unary is a one-operand, one-result op whose rule build makes from its attributes.
func (s *opSig) unary(in, out [][]int64, class opClass, build func(a attrs, in, out []int64) (*Rule, error)) (*Rule, opClass, error) {
	if err := s.counts(in, out, 1, 1); err != nil {
		return nil, 0, err
	}
	r, err := build(s.a, in[0], out[0])
	return r, class, err
}

// binary is a two-operand, one-result op whose rule build makes from its attributes.
func (s *opSig) binary(in, out [][]int64, build func(a attrs, lhs, rhs, out []int64) (*Rule, error)) (*Rule, opClass, error) {
	if err := s.counts(in, out, 2, 1); err != nil {
		return nil, 0, err
	}
	r, err := build(s.a, in[0], in[1], out[0])
	return r, classOther, err
}

func (s *opSig) constant(in, out [][]int64) (*Rule, opClass, error) {
	if err := s.counts(in, out, 0, 1); err != nil {
		return nil, 0, err
	}
	return nil, classNoRule, nil
}

func (s *opSig) iota(in, out [][]int64) (*Rule, opClass, error) {
	if err := s.counts(in, out, 0, 1); err != nil {
		return nil, 0, err
	}
	d, err := s.a.int("iota_dimension", 0)
	if err != nil {
		return nil, 0, err
	}
	if d < 0 || (len(out[0]) > 0 && d >= int64(len(out[0]))) {
		return nil, 0, s.a.errf("iota_dimension", "dim %d is out of range for rank %d", d, len(out[0]))
	}
	return nil, classNoRule, nil
}

func (s *opSig) dot(in, out [][]int64) (*Rule, opClass, error) {
	if err := s.counts(in, out, 2, 1); err != nil {
		return nil, 0, err
	}
	r, err := dotRule(s.op.Kind, s.a, in[0], in[1], out[0])
	return r, classOther, err
}

func (s *opSig) einsum(in, out [][]int64) (*Rule, opClass, error) {
	if err := s.counts(in, out, -1, 1); err != nil {
		return nil, 0, err
	}
	eq, ok, err := s.a.str("equation")
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, s.a.errf("equation", "is required, e.g. \"bij,bjk->bik\"")
	}
	e, err := ParseEinsum(eq, s.a.field+".equation")
	if err != nil {
		return nil, 0, err
	}
	r, err := e.rule(in, out[0], s.a.field+".equation")
	return r, classOther, err
}

func (s *opSig) reshape(in, out [][]int64) (*Rule, opClass, error) {
	if err := s.counts(in, out, 1, 1); err != nil {
		return nil, 0, err
	}
	ni, no := numElements(in[0]), numElements(out[0])
	if ni != no {
		return nil, 0, s.fail("results[0]", "reshape from %v (%d elements) to %v (%d elements) changes the element count", in[0], ni, out[0], no)
	}
	if ni == 0 {
		return nil, classNoRule, nil
	}
	return reshapeRule(in[0], out[0]), classPassThrough, nil
}

func (s *opSig) concatenate(in, out [][]int64) (*Rule, opClass, error) {
	if len(in) == 0 {
		return nil, 0, s.fail("operands", "needs at least one operand")
	}
	if err := s.counts(in, out, -1, 1); err != nil {
		return nil, 0, err
	}
	r, err := concatRule(s.a, in, out[0])
	return r, classOther, err
}

func (s *opSig) dynamicSlice(in, out [][]int64) (*Rule, opClass, error) {
	if len(in) == 0 {
		return nil, 0, s.fail("operands", "needs the operand and its start indices")
	}
	if err := s.counts(in, out, -1, 1); err != nil {
		return nil, 0, err
	}
	r, err := dynamicSliceRule(s.a, in, out[0])
	return r, classDynSlice, err
}

func (s *opSig) pad(in, out [][]int64) (*Rule, opClass, error) {
	if len(in) != 1 && len(in) != 2 {
		return nil, 0, s.fail("operands", "takes the operand and an optional scalar padding value, got %d operands", len(in))
	}
	if err := s.counts(in, out, -1, 1); err != nil {
		return nil, 0, err
	}
	r, err := padRule(s.a, in, out[0])
	return r, classOther, err
}

func (s *opSig) reverse(in, out [][]int64) (*Rule, opClass, error) {
	if err := s.counts(in, out, 1, 1); err != nil {
		return nil, 0, err
	}
	if !slices.Equal(in[0], out[0]) {
		return nil, 0, s.fail("results[0]", "result shape %v differs from operand shape %v", out[0], in[0])
	}
	dims, err := s.a.dimList("dimensions", len(in[0]), true)
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
}

func (s *opSig) custom(in, out [][]int64) (*Rule, opClass, error) {
	if s.op.Rule == "" {
		return nil, 0, s.fail("rule", "is required for a custom op, e.g. \"([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}\"")
	}
	r, err := ParseRule(s.op.Rule, s.field+".rule")
	if err != nil {
		return nil, 0, err
	}
	if err := r.checkShapes(in, out, s.field+".rule"); err != nil {
		return nil, 0, err
	}
	return r, classOther, nil
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

var (
	gatherDimNames  = indexedDimNames{"offset_dims", "collapsed_slice_dims", "operand_batching_dims", "start_indices_batching_dims"}
	scatterDimNames = indexedDimNames{"update_window_dims", "inserted_window_dims", "input_batching_dims", "scatter_indices_batching_dims"}
)
