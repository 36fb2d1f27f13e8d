// Package hlo reads compiled HLO modules as XLA, JAX and torch_xla print them (JAX's
// jax.jit(f).lower(x).compile().as_text(), a file of --xla_dump_to, XLA's own test
// modules) and audits what XLA emitted: every collective (all-gather, all-reduce,
// reduce-scatter, all-to-all, ragged-all-to-all, collective-permute, send/recv, their
// async -start forms) decoded onto the axes of a device mesh and priced with a cost
// model times the trip counts of the while loops around it; what communicates without a
// price listed as Unmodeled; and XLA's full-rematerialization pattern (gathers that
// make a sharded tensor whole on every device, then a dynamic-slice that keeps a piece).
// It knows nothing of HTTP.
//
//	HLO text ──ParseContext──▶ Module ──Analyze(mesh, cost model)──▶ Analysis{Collectives, Remats, Unmodeled}
//	Analysis ──Schedule(roofline, measured costs)──▶ Schedule{step, compute, exposed and overlapped time per collective}
//
// Schedule walks the entry computation in its printed order, compute priced by a
// roofline and collectives by the cost model (or a profile's measured costs, read by
// ParseProfile), each async collective's done waiting for what the compute since its
// start has not hidden.
//
// The mesh is the request's, checked against the module's device count and its
// parameters' shardings, or inferred (InferMesh). Device ids in replica_groups and
// source_target_pairs are the mesh's ids (its device_ids, else row-major positions). A
// group decodes to the mesh axes (full axes or Shardy sub-axes "x:(m)k") whose
// coordinates it runs over, in member order; groups that match no axes keep their sizes,
// say why in AxesNote and are priced as a ring of their devices.
//
// Every parse error is a *fielderr.FieldError on Field naming the line and column.
// Parsing is linear in the text and never recurses on its input's nesting; positions are
// looked up in the module's line index.
package hlo
