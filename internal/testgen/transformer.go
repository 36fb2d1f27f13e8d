// Package testgen generates the test and benchmark inputs several packages share, once:
// the transformer graph that propagation's tests decode and the api's tests post.
package testgen

import (
	"encoding/json"
	"fmt"
)

// TransformerGraphJSON is a POST /v1/graph body: layers of a pre-norm transformer block
// (norm, attention through einsums, residual, MLP with a transpose) on data=4,model=8,
// with only the input and the weights annotated, like a front-end sends it. 21 ops per
// layer.
func TransformerGraphJSON(layers int) string {
	const B, S, D, H, K, F = 8, 128, 512, 8, 64, 2048
	tensors := map[string]any{}
	var ops []map[string]any
	tensor := func(name, sharding string, shape ...int) string {
		t := map[string]any{"shape": shape, "dtype": "bf16"}
		if sharding != "" {
			t["sharding"] = json.RawMessage(sharding)
		}
		tensors[name] = t
		return name
	}
	op := func(name, kind string, in []string, out string, attrs map[string]any) {
		o := map[string]any{"name": name, "op": kind, "operands": in, "results": []string{out}}
		if attrs != nil {
			o["attrs"] = attrs
		}
		ops = append(ops, o)
	}
	eq := func(e string) map[string]any { return map[string]any{"equation": e} }
	dot := func(l, r int) map[string]any {
		return map[string]any{"lhs_contracting_dimensions": []int{l}, "rhs_contracting_dimensions": []int{r}}
	}
	x := tensor("x", `["data", null, null]`, B, S, D)
	for l := range layers {
		p := func(n string) string { return fmt.Sprintf("l%d.%s", l, n) }
		sq := tensor(p("sq"), "", B, S, D)
		op(p("sq"), "multiply", []string{x, x}, sq, nil)
		ss := tensor(p("ss"), "", B, S)
		op(p("ss"), "reduce", []string{sq}, ss, map[string]any{"dimensions": []int{2}})
		rs := tensor(p("rs"), "", B, S)
		op(p("rs"), "rsqrt", []string{ss}, rs, nil)
		rb := tensor(p("rb"), "", B, S, D)
		op(p("rb"), "broadcast_in_dim", []string{rs}, rb, map[string]any{"broadcast_dimensions": []int{0, 1}})
		xn := tensor(p("xn"), "", B, S, D)
		op(p("xn"), "multiply", []string{x, rb}, xn, nil)
		var qkv [3]string
		for i, n := range []string{"q", "k", "v"} {
			w := tensor(p("w"+n), `[null, "model", null]`, D, H, K)
			qkv[i] = tensor(p(n), "", B, S, H, K)
			op(p(n), "einsum", []string{xn, w}, qkv[i], eq("bsd,dhk->bshk"))
		}
		sc := tensor(p("scores"), "", B, H, S, S)
		op(p("scores"), "einsum", []string{qkv[0], qkv[1]}, sc, eq("bshk,bthk->bhst"))
		pr := tensor(p("probs"), "", B, H, S, S)
		op(p("probs"), "exponential", []string{sc}, pr, nil)
		cx := tensor(p("ctx"), "", B, S, H, K)
		op(p("ctx"), "einsum", []string{pr, qkv[2]}, cx, eq("bhst,bthk->bshk"))
		cxr := tensor(p("ctxr"), "", B, S, H*K)
		op(p("ctxr"), "reshape", []string{cx}, cxr, nil)
		wo := tensor(p("wo"), `["model", null]`, H*K, D)
		ao := tensor(p("attn"), "", B, S, D)
		op(p("attn"), "dot_general", []string{cxr, wo}, ao, dot(2, 0))
		r1 := tensor(p("res1"), "", B, S, D)
		op(p("res1"), "add", []string{x, ao}, r1, nil)
		w1 := tensor(p("w1"), `[null, "model"]`, D, F)
		h := tensor(p("h"), "", B, S, F)
		op(p("mlp1"), "dot_general", []string{r1, w1}, h, dot(2, 0))
		a := tensor(p("a"), "", B, S, F)
		op(p("gelu"), "tanh", []string{h}, a, nil)
		ht := tensor(p("ht"), "", F, B, S)
		op(p("ht"), "transpose", []string{a}, ht, map[string]any{"permutation": []int{2, 0, 1}})
		w2 := tensor(p("w2"), `["model", null]`, F, D)
		y := tensor(p("y"), "", B, S, D)
		op(p("mlp2"), "dot_general", []string{ht, w2}, y, dot(0, 0))
		out := tensor(p("out"), "", B, S, D)
		op(p("res2"), "add", []string{r1, y}, out, nil)
		x = out
	}
	b, err := json.Marshal(map[string]any{"mesh": "data=4,model=8", "tensors": tensors, "ops": ops,
		"inputs": []string{"x"}, "outputs": []string{x}, "cost_model": "tpu-v5p"})
	if err != nil {
		panic(err)
	}
	return string(b)
}
