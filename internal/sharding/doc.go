// Package sharding is shardplan's domain vocabulary: device meshes with named axes,
// axis references (full axes and Shardy sub-axes), tensor shardings, their three input
// forms (object, Shardy text, PartitionSpec-like arrays), the canonical Shardy printer,
// the invariants every sharding obeys, and the ceildiv/floordiv tile maps.
//
// The package imports nothing else of shardplan's and no transport package. Every
// validation failure is a *FieldError (or an Errors list of them) whose Field is the path
// of the offending value as it was sent on the wire, e.g. "source.dims[1].axes[0]".
package sharding
