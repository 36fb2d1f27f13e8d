// Package propagation is Shardy's sharding propagation for shardplan: given an op
// graph with a few annotated tensors, it gives every tensor a sharding, then says which
// layout each op computes in, which operands and results must be resharded, and which
// sharded reductions need an all-reduce or reduce-scatter.
//
// # Model
//
// Every op has an OpSharding rule (Rule): its tensors' dims described over shared
// factors, einsum-style. dot_general is ([b,m,k],[b,k,n])->([b,m,n]) with k a reduction
// factor; reshape uses compound factors ([ij]) found by a gcd walk over both shapes;
// a custom op brings its rule in Shardy's text form (ParseRule); einsum derives it from
// its equation (ParseEinsum). constant, iota and while have no rule; a while instead
// ties operand i, body return i, result i and the region parameters i together with a
// data-flow edge that behaves like an identity op.
//
// # Algorithm
//
//	user priorities (ascending)        dims with priority > 0 start closed and empty,
//	  └ op-priority stages 0..4        their axes blocked, and are released one level
//	      └ fixpoint worklist          at a time
//	          └ visit(op):
//	              1 project tensor dims onto factors (sub-axes, overflow axes)
//	              2 compatible major axes per factor, in the stage's direction
//	              3 remove conflicts: basic (one list for all tensors) or
//	                aggressive (per tensor, factors ordered by source size)
//	              4 project back; a dim only ever grows by a strict prefix extension
//
// Growth is monotone: closed dims, explicitly replicated and unreduced axes never change
// and an open dim's axes only extend, so every fixpoint terminates (see fixpoint for the
// bound). The op-priority stages let pass-through ops (elementwise, reshape, transpose,
// edges) settle before dots and reductions, and release broadcast_in_dim backwards only
// until the last stage.
//
// # After propagation
//
// For each op, the factor shardings of its tensors are merged into one list per factor
// (Shardy's findCommonAxes); each operand whose layout differs gets a Reshard to that
// layout, each result computed differently gets a Reshard back to its own, and the axes
// on reduction factors become an all_reduce, or a reduce_scatter when the result is then
// sharded on them. Explain records where every axis came from.
//
// The package imports no transport; errors on bad input are *sharding.FieldError values
// naming the wire path (ops[3].attrs.permutation).
package propagation
