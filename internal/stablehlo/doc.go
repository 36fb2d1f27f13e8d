// Package stablehlo reads StableHLO modules in MLIR text into propagation graphs and
// writes propagated shardings back into the text. It knows nothing of HTTP.
//
// # Input
//
// Parse reads both printed forms: the pretty form that jax.jit(f).lower(...).as_text()
// and Shardy's lit tests print (stablehlo.dot_general %a, %b, contracting_dims = [1] x
// [0] : ...; reduce(... init: ...) applies ... across dimensions = [...]; while(%it =
// %x) ... cond {...} do {...}), and the generic form ("stablehlo.add"(%a, %b) : ..., down
// to "builtin.module" and "func.func"). It keeps what sharding needs: sdy.mesh
// declarations, functions with their argument and result attributes, ops with their
// results (%1:2 gives 1#0 and 1#1), operands, attributes, result types and regions, and
// for every attribute dictionary the byte span Annotate rewrites. Every op's and
// parameter's loc(...) is kept as text with the module's #loc aliases, and ResolveLoc
// (Import.OpLocation) reads it into a file, line and op name; attributes it does not
// interpret are kept as text (Raw).
//
//	MLIR text ──Parse──▶ Module ──FromModule──▶ Import{Graph, Mesh, Opaque}
//	                                                  │
//	                                      propagation.Propagate
//	                                                  │
//	      annotated MLIR text ◀──Import.Annotate── shardings
//
// # Import
//
// FromModule turns one function into a propagation.Graph: tensor ids are the SSA names
// without '%' (arg0, 3, 1#1), the function's results are result0, result1, ... tied to
// the returned values by identity ops; ops are named by their first result. StableHLO
// ops of the graph API keep their kind, their attributes renamed to StableHLO's
// (dims = [...] of transpose becomes permutation); calls, composites and
// sdy.named_computation are inlined (ids "callee@call/name"); an op with an
// sdy.sharding_rule is a custom op with that rule; anything else is an opaque barrier
// listed in Import.Opaque. Annotations come from sdy.sharding (arguments and results),
// sdy.sharding_per_value (ops), sdy.sharding_constraint and mhlo.sharding strings (read
// with sharding.ParseHLO on the function's mesh).
//
// # Errors and limits
//
// Every error is a *sharding.FieldError on Field ("module") whose message starts with
// "line L, column C" (or on "function" or "mesh"); Import.Locate gives the errors of
// propagating the graph the same form. Parsing is linear in the text; nesting (regions,
// attribute brackets, inlined calls) is bounded by Limits.MaxDepth and ops by
// Limits.MaxOps, so no input exhausts the stack or loops.
package stablehlo
