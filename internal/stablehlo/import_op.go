package stablehlo

import (
	"slices"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/propagation"
)

// This file translates one operation (and while loops, calls and named computations,
// inlined) into propagation ops with their attributes.

func calleeOf(op *Op) string {
	if s, ok := op.Attrs.Vals["call_target_name"].(string); ok {
		return s
	}
	for _, p := range op.Positional {
		if s, ok := p.v.(Symbol); ok {
			return s.Name
		}
	}
	for _, k := range []string{"callee", "decomposition"} {
		if s, ok := op.Attrs.Vals[k].(Symbol); ok {
			return s.Name
		}
	}
	return ""
}

// ops imports a block's ops into out and returns the ids its terminator returns (nil
// when it has none).
func (b *builder) ops(e *env, ops []*Op, out *[]propagation.Op, fnName string) []string {
	var ret []string
	for _, op := range ops {
		if b.err != nil {
			return nil
		}
		b.nops++
		if b.nops > b.lim.MaxOps {
			b.errAt(op.Pos, "the graph has more than %d ops (calls inlined); the limit is configurable (SHARDPLAN_MAX_GRAPH_OPS)", b.lim.MaxOps)
			return nil
		}
		if b.nops%ctxCheckEvery == 0 && b.ctx.Err() != nil {
			b.err = b.ctx.Err()
			return nil
		}
		if isReturn(op.Name) {
			ret = ret[:0]
			for _, v := range op.Operands {
				ret = append(ret, b.use(e, v, op.Pos))
			}
			continue
		}
		b.op(e, op, out)
	}
	return ret
}

// use resolves an SSA use to its tensor id ("" for a non-tensor value).
func (b *builder) use(e *env, v string, pos int) string {
	id, ok := e.vals[v]
	if !ok {
		b.errAt(pos, "%%%s is used but not defined (before this op)", v)
	}
	return id
}

// kindOf maps an op to a propagation kind ("" when it is not modelled).
func kindOf(op *Op) string {
	name := op.Name
	switch name {
	case "sdy.sharding_constraint", "sdy.reshard":
		return "sharding_constraint"
	case "sdy.data_flow_edge":
		return "copy"
	case "sdy.constant":
		return "constant"
	case "stablehlo.optimization_barrier":
		return "barrier"
	case "chlo.erf", "chlo.tan":
		// CHLO's elementwise ops that have a StableHLO-named twin in the graph API
		return strings.TrimPrefix(name, "chlo.")
	case "stablehlo.custom_call":
		if calleeOf(op) == "Sharding" {
			return "sharding_constraint"
		}
		return withRule(op)
	case "stablehlo.while":
		return "while"
	}
	k, ok := strings.CutPrefix(name, "stablehlo.")
	if !ok || k == "custom" || k == "sharding_constraint" || k == "opaque" {
		return withRule(op)
	}
	if _, ok := supported[k]; ok {
		return k
	}
	return withRule(op)
}

// withRule is "custom" for an op the import does not model that carries its own Shardy
// rule (sdy.sharding_rule, or sdy.op_sharding_rule), "" (opaque) otherwise.
func withRule(op *Op) string {
	if _, _, ok := shardingRule(op); ok {
		return "custom"
	}
	return ""
}

// shardingRule is op's #sdy.op_sharding_rule<...> attribute and its position.
func shardingRule(op *Op) (Raw, int, bool) {
	for _, k := range []string{"sdy.sharding_rule", "sdy.op_sharding_rule"} {
		if r, ok := op.Attrs.Vals[k].(Raw); ok {
			return r, op.Attrs.Pos[k], true
		}
	}
	return Raw{}, 0, false
}

var supported = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range propagation.SupportedOps() {
		m[k] = true
	}
	return m
}()

// op translates one op of the function (or of an inlined body) into out: a call or a
// named computation is inlined, an op shardplan models becomes a propagation op of its
// kind, and any other op becomes an opaque one.
func (b *builder) op(e *env, op *Op, out *[]propagation.Op) {
	operands, allTensors := b.operands(e, op)
	if b.err != nil {
		return
	}
	if b.inlined(e, op, operands, out) {
		return
	}
	kind, ok := b.kind(op, allTensors)
	if !ok {
		return
	}
	results, ids := b.results(e, op)
	opName := ""
	if len(results) > 0 {
		opName = results[0]
	}
	if kind == "" {
		b.opaque(op, opName, operands, results, ids, out)
		return
	}
	b.imp.opPos[opName] = op.Pos
	b.modelled(e, op, propagation.Op{Name: opName, Kind: kind, Operands: operands, Results: results, Attrs: attrsFor(kind, op)}, ids, out)
}

// operands returns the tensor ids of op's operands and init values, and whether every
// one of them is a tensor. Values another dialect's syntax may define are skipped.
func (b *builder) operands(e *env, op *Op) ([]string, bool) {
	operands := make([]string, 0, len(op.Operands)+len(op.Inits))
	allTensors := true
	ins := op.Operands
	if len(op.Inits) > 0 {
		ins = slices.Concat(op.Operands, op.Inits)
	}
	for _, v := range ins {
		if _, defined := e.vals[v]; !defined && !knownDialect(op.Name) {
			continue // another dialect's syntax may define values among its operands
		}
		id := b.use(e, v, op.Pos)
		if id == "" {
			allTensors = false
			continue
		}
		operands = append(operands, id)
	}
	return operands, allTensors
}

// inlined inlines a call, a composite (its decomposition function) or a named
// computation into out, and reports whether it did.
func (b *builder) inlined(e *env, op *Op, operands []string, out *[]propagation.Op) bool {
	switch {
	case op.Name == "func.call" || op.Name == "stablehlo.composite":
		// a composite is its decomposition function
		return b.inline(e, op, operands, out)
	case op.Name == "sdy.named_computation" && len(op.Regions) == 1:
		return b.inlineBody(e, op, operands, out, namedComputation(op), op.Regions[0].Args, op.Regions[0].Ops)
	}
	return false
}

// kind returns the propagation kind of op ("" for an opaque op: one shardplan does not
// model, or one with a result that is not a tensor). It is false, with b.err set, when
// op's result types do not match its results.
func (b *builder) kind(op *Op, allTensors bool) (string, bool) {
	kind := kindOf(op)
	if !knownDialect(op.Name) && kind == "" {
		// Another dialect's syntax does not say reliably which type is whose: its
		// results are opaque values.
		op.ResultTypes = make([]Type, len(op.Results))
	}
	if len(op.ResultTypes) != len(op.Results) {
		b.errAt(op.Pos, "%s defines %d results but its type gives %d", op.Name, len(op.Results), len(op.ResultTypes))
		return "", false
	}
	for _, t := range op.ResultTypes {
		allTensors = allTensors && t.Tensor
	}
	if !allTensors {
		kind = ""
	}
	return kind, true
}

// results defines op's results: the tensor ids of those that are tensors, and the id of
// every result ("" for a value that is not a tensor). An op of the function's own text
// whose results are all tensors is recorded for Annotate.
func (b *builder) results(e *env, op *Op) (results, ids []string) {
	for k, name := range op.Results {
		id := b.define(e, name, op.ResultTypes[k])
		ids = append(ids, id)
		if id != "" {
			results = append(results, id)
			b.imp.opOf[id] = op
		}
	}
	if e.prefix == "" && len(results) == len(op.Results) {
		b.imp.defs = append(b.imp.defs, opDef{op, ids})
	}
	return results, ids
}

// opaque records op as an op shardplan does not model and, when it has tensor results,
// adds an opaque op named opName to out.
func (b *builder) opaque(op *Op, opName string, operands, results, ids []string, out *[]propagation.Op) {
	line, col := b.imp.lineCol(op.Pos)
	b.imp.Opaque = append(b.imp.Opaque, OpaqueOp{Op: op.Name, Results: nonNil(results), Line: line, Column: col})
	if opName != "" {
		b.imp.opPos[opName] = op.Pos
		*out = append(*out, propagation.Op{Name: opName, Kind: "opaque", Operands: operands, Results: results})
	}
	// An op shardplan does not model may carry shardings it cannot express either
	// ({manual} around shard_map): they are dropped, never an error.
	if b.err == nil {
		b.resultShardings(op, ids)
		if b.err != nil {
			b.err = nil
			for _, id := range results {
				b.imp.Graph.Tensors[id].Sharding = nil
			}
		}
	}
}

// modelled completes pop, the propagation op for op, with what its kind needs (a custom
// rule, a constraint's sharding, a while's body) and the shardings of its results, and
// adds it to out; an optimization barrier becomes one copy op per value.
func (b *builder) modelled(e *env, op *Op, pop propagation.Op, ids []string, out *[]propagation.Op) {
	switch pop.Kind {
	case "custom":
		b.customRule(op, &pop)
	case "barrier":
		b.barrier(op, pop.Operands, pop.Results, ids, out)
		return
	case "sharding_constraint", "copy":
		if text, pos, _, ok := constraintSharding(op); ok && op.Name != "stablehlo.custom_call" && len(pop.Results) == 1 {
			t := b.imp.Graph.Tensors[pop.Results[0]]
			t.Sharding = b.sdySharding(text, pos, t.Shape, "%"+pop.Results[0])
		}
	case "while":
		b.while(e, op, &pop)
	}
	if b.err != nil {
		return
	}
	b.resultShardings(op, ids)
	*out = append(*out, pop)
}

// customRule sets pop's rule from op's sdy.sharding_rule, or sets b.err.
func (b *builder) customRule(op *Op, pop *propagation.Op) {
	r, rpos, _ := shardingRule(op)
	text := strings.TrimSpace(r.Text)
	body, ok := strings.CutPrefix(text, "#sdy.op_sharding_rule<")
	if !ok || !strings.HasSuffix(body, ">") {
		b.errAt(rpos, "sdy.sharding_rule must be #sdy.op_sharding_rule<([...])->([...]) {...}>")
		return
	}
	// Shardy prints "..., custom"; the rule reader takes the word without the comma.
	pop.Rule = customRE.ReplaceAllString(strings.TrimSuffix(body, ">"), " custom")
}

// barrier adds one copy op per value of an optimization_barrier to out: it is the
// identity on each operand, and Shardy propagates through it (data-flow edges). Each
// copy is named by its result.
func (b *builder) barrier(op *Op, operands, results, ids []string, out *[]propagation.Op) {
	if len(operands) != len(results) {
		b.errAt(op.Pos, "%s has %d operands but %d results", op.Name, len(operands), len(results))
		return
	}
	b.resultShardings(op, ids)
	for k := range results {
		b.imp.opPos[results[k]] = op.Pos
		*out = append(*out, propagation.Op{Name: results[k], Kind: "copy", Operands: []string{operands[k]}, Results: []string{results[k]}})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// while imports a while op's cond and body regions. The pretty form names the region
// arguments once (%iterArg = %x) for both regions; the generic form gives each region
// its own block arguments.
func (b *builder) while(e *env, op *Op, pop *propagation.Op) {
	if len(op.Regions) != 2 {
		b.errAt(op.Pos, "stablehlo.while needs a cond and a body region, found %d regions", len(op.Regions))
		return
	}
	for ri, r := range op.Regions {
		reg := &propagation.Region{}
		var names []string
		if len(r.Args) > 0 {
			for _, a := range r.Args {
				names = append(names, a.Name)
			}
		} else {
			names = op.Bindings
		}
		if len(names) != len(op.ResultTypes) {
			b.errAt(op.Pos, "stablehlo.while has %d results but its region has %d arguments", len(op.ResultTypes), len(names))
			return
		}
		for k, n := range names {
			id := b.define(e, n, op.ResultTypes[k])
			if id == "" {
				b.errAt(op.Pos, "stablehlo.while carries a non-tensor value; only tensors are supported")
				return
			}
			reg.Params = append(reg.Params, id)
		}
		ret := b.ops(e, r.Ops, &reg.Ops, "")
		for _, id := range ret {
			if id == "" {
				b.errAt(op.Pos, "stablehlo.while returns a non-tensor value; only tensors are supported")
				return
			}
		}
		reg.Returns = ret
		if ri == 0 {
			pop.Cond = reg
		} else {
			pop.Body = reg
		}
	}
}

// inline imports a call to a function defined in the module in place: the callee's
// values get ids "callee@call/name" and an identity op connects each returned value to
// the call's result. It returns false (the call stays opaque) for external or
// recursive callees or beyond the nesting limit.
func (b *builder) inline(e *env, op *Op, operands []string, out *[]propagation.Op) bool {
	callee := b.funcs[calleeOf(op)]
	if callee == nil || callee.Body == nil || len(callee.Results) != len(op.Results) {
		return false
	}
	return b.inlineBody(e, op, operands, out, callee.Name, callee.Args, callee.Body.Ops)
}

// namedComputation is the Shardy name of sdy.named_computation<"name">, "" when absent.
func namedComputation(op *Op) string {
	if name, ok := op.Attrs.Vals["name"].(string); ok {
		return name
	}
	for _, p := range op.Positional {
		if r, ok := p.v.(Raw); ok && strings.HasPrefix(r.Text, "<\"") {
			if name, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(r.Text, "<"), ">")); err == nil {
				return name
			}
		}
	}
	return ""
}

// inlineBody imports a body (a callee's or a named computation's region) with its
// arguments bound to operands. It returns false when the body cannot be inlined.
func (b *builder) inlineBody(e *env, op *Op, operands []string, out *[]propagation.Op, name string, args []*Param, body []*Op) bool {
	if name == "" || slices.Contains(b.stack, name) || len(b.stack) >= b.lim.MaxDepth ||
		len(operands) != len(op.Operands) || len(args) != len(operands) || len(op.Results) == 0 ||
		len(op.ResultTypes) != len(op.Results) {
		return false
	}
	for _, t := range op.ResultTypes {
		if !t.Tensor {
			return false
		}
	}
	first := op.Results[0]
	ce := &env{vals: map[string]string{}, prefix: e.prefix + name + "@" + first + "/"}
	for k, a := range args {
		ce.vals[a.Name] = operands[k]
	}
	b.stack = append(b.stack, name)
	ret := b.ops(ce, body, out, name)
	b.stack = b.stack[:len(b.stack)-1]
	if b.err != nil {
		return true
	}
	if len(ret) != len(op.Results) {
		b.errAt(op.Pos, "@%s returns %d values but %s defines %d results", name, len(ret), op.Name, len(op.Results))
		return true
	}
	var ids []string
	for k, res := range op.Results {
		id := b.define(e, res, op.ResultTypes[k])
		ids = append(ids, id)
		if ret[k] == "" {
			b.errAt(op.Pos, "@%s returns a non-tensor value", name)
			return true
		}
		b.imp.opPos[id] = op.Pos
		b.imp.opOf[id] = op
		*out = append(*out, propagation.Op{Name: id, Kind: "copy", Operands: []string{ret[k]}, Results: []string{id}})
	}
	if e.prefix == "" {
		b.imp.defs = append(b.imp.defs, opDef{op, ids})
	}
	b.resultShardings(op, ids)
	return true
}

// attrNames are the attributes propagation reads; everything else is dropped.
var attrNames = map[string]bool{
	"lhs_batching_dimensions": true, "rhs_batching_dimensions": true, "lhs_contracting_dimensions": true,
	"rhs_contracting_dimensions": true, "dot_dimension_numbers": true, "broadcast_dimensions": true,
	"permutation": true, "dimensions": true, "dimension": true, "start_indices": true, "limit_indices": true,
	"strides": true, "slice_sizes": true, "edge_padding_low": true, "edge_padding_high": true,
	"interior_padding": true, "iota_dimension": true, "equation": true, "dimension_numbers": true,
	"scatter_dimension_numbers": true, "window_strides": true, "padding": true, "lhs_dilation": true,
	"rhs_dilation": true, "feature_group_count": true, "batch_group_count": true,
}

// prettyNames renames the pretty form's keyword attributes to StableHLO's attribute
// names, per op kind.
var prettyNames = map[string]map[string]string{
	"broadcast_in_dim": {"dims": "broadcast_dimensions"},
	"transpose":        {"dims": "permutation"},
	"reverse":          {"dims": "dimensions"},
	"concatenate":      {"dim": "dimension"},
	"iota":             {"dim": "iota_dimension"},
	"dynamic_slice":    {"sizes": "slice_sizes"},
	"pad":              {"low": "edge_padding_low", "high": "edge_padding_high", "interior": "interior_padding"},
	"einsum":           {"config": "equation", "einsum_config": "equation"},
	"convolution":      {"dim_numbers": "dimension_numbers"},
}

// attrsFor builds the attribute map propagation reads for op.
func attrsFor(kind string, op *Op) map[string]any {
	out := map[string]any{}
	ren := prettyNames[kind]
	for k, v := range op.Attrs.Vals {
		if n, ok := ren[k]; ok {
			k = n
		}
		switch x := v.(type) {
		case dimsPair:
			switch k {
			case "batching_dims":
				out["lhs_batching_dimensions"], out["rhs_batching_dimensions"] = x.L, x.R
			case "contracting_dims":
				out["lhs_contracting_dimensions"], out["rhs_contracting_dimensions"] = x.L, x.R
			}
			continue
		case map[string]any:
			if k == "window" && kind == "convolution" {
				for wk, wn := range map[string]string{"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation", "rhs_dilate": "rhs_dilation"} {
					if wv, ok := x[wk]; ok {
						out[wn] = wv
					}
				}
				continue
			}
		}
		if k == "dot_dimension_numbers" {
			if m, ok := v.(map[string]any); ok {
				for dk, dv := range m { // flat, as the pretty form gives them
					if attrNames[dk] {
						out[dk] = dv
					}
				}
				continue
			}
		}
		if attrNames[k] {
			out[k] = v
		}
	}
	if kind == "slice" && len(op.Slice) > 0 {
		var s, l, st []any
		for _, r := range op.Slice {
			s, l, st = append(s, r[0]), append(l, r[1]), append(st, r[2])
		}
		out["start_indices"], out["limit_indices"], out["strides"] = s, l, st
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
