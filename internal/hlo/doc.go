// Package hlo reads compiled HLO modules as XLA prints them (JAX's
// jax.jit(f).lower(x).compile().as_text(), or a file of --xla_dump_to) and audits what
// XLA emitted: every collective (all-gather, all-reduce, reduce-scatter, all-to-all,
// collective-permute, their async -start forms) decoded onto the axes of a device mesh
// and priced with a cost model, and XLA's full-rematerialization pattern (gathers that
// make a sharded tensor whole on every device, then a dynamic-slice that keeps a piece).
// It knows nothing of HTTP.
//
//	HLO text ──Parse──▶ Module ──Analyze(mesh, cost model)──▶ Analysis{Collectives, Remats}
//
// Device ids in replica_groups and source_target_pairs are the mesh's ids (its
// device_ids, else row-major positions). A group decodes to the mesh axes (full axes or
// Shardy sub-axes "x:(m)k") whose coordinates it runs over, in member order; groups
// that match no axes keep their sizes and say why in AxesNote.
//
// Every parse error is a *fielderr.FieldError on Field naming the line and column. Parse
// is linear in the text and never recurses on its input's nesting.
package hlo
