// Package cost prices collectives on a device mesh: the pluggable bandwidth model the
// planner chooses schedules by. The formulas, figures and sources are those of
// docs/COSTMODEL.md; section numbers below refer to it.
//
// # Model
//
// A Model prices one Collective: a kind, a byte count V in the convention of B.0 (the
// full array of the group; for collective_permute and all_to_all_v the most bytes one
// device sends or receives) and the group, as mesh axes or sub-axes. The answer is an
// Estimate in microseconds, split into a latency term (steps × per-step latency, plus a
// per-collective base) and a bandwidth term, with the link class that bounds it.
// Zero bytes, or a group of one device, cost nothing.
//
// Fabric is the topology-aware implementation. Every group axis rides one link class:
//
//	ici     TPU inter-chip torus; each axis is a ring that wraps per the profile's
//	        rule (v5e/v6e: size 16; v4/v5p: "cube"), otherwise a line
//	nvlink  GPU NVSwitch domain: a switch with full bisection
//	ib      InfiniBand (or RoCE) between nodes, one NIC per GPU: a switch
//	dcn     data-center network between TPU slices: a switch
//
// TPU axes ride ici unless the model's axis_links says otherwise (mark a multislice
// axis "dcn"). On a GPU model (gpus_per_node > 0) an axis rides nvlink when its span in
// row-major device positions, mesh.Stride(axis) × sub-axis minor × size, divides
// gpus_per_node, and ib otherwise; a custom device_ids order is not considered, so use
// axis_links when it matters. A strided sub-axis on a ring shares every link with its
// interleaved neighbours, so its bandwidth is divided by its minor factor, and only a
// sub-axis that spans to the axis' major end keeps the wraparound.
//
// # Formulas
//
// With N devices, W bytes/s per link per direction and α per step (B.1):
//
//	            all_gather, reduce_scatter    all_to_all                      steps H (AG)
//	ring_uni    (N-1)/N · V/W                 (N-1)/(2N) · V/W                 N-1
//	ring_bidi   (N-1)/N · V/(2W)              ⌊N/2⌋⌈N/2⌉/(2N²) · V/W           ⌊N/2⌋
//	line        (N-1)/N · V/W                 ⌊N/2⌋⌈N/2⌉/N² · V/W              N-1
//	switch      (N-1)/N · V/W                 (N-1)/N² · V/W                   N-1
//
// all_reduce is reduce_scatter plus all_gather: twice the time and the steps. These are
// the exact forms; scaling-book's approximation V/W_bidi drops (N-1)/N. Several torus
// axes of one link class run concurrently (B.2): an all-gather takes
// (N-1)/N · V/Σ c_i·W_i with c_i = 2 on a wrapped axis and 1 otherwise, over Σ H_i
// steps; an all-to-all is dimension-ordered, axis i carrying a one-axis all-to-all of
// V·N_i/N bytes, the slowest axis bounding it (for wrapped axes this is B.2's bisection
// form max_i V·N_i/(4·c_i·N·W_i)). The sequential one-axis-at-a-time form is the sum of
// one-axis estimates of the shrinking array, which callers can price themselves.
//
// A group that spans several link classes is hierarchical (B.4): its levels are
// ordered fastest first by per-device injection bandwidth. An all-gather gathers the
// slowest level first on the smallest array and the fastest level last on all of V
// (level j moves V/∏_{i<j} N_i); reduce-scatter mirrors it; all-reduce is both, which
// equals a reduce-scatter and all-gather on the fast levels around an all-reduce on the
// slowest. "sequential" hierarchy (the default) adds the levels' bandwidth terms,
// "overlapped" takes the largest (pipelined). An all-to-all sends directly: with the
// levels nested ici, nvlink inside ib, dcn, level j carries each device's bytes for
// the peers whose outermost differing level is j, and the levels overlap.
//
// # Point-to-point steps: routed traffic
//
// A collective_permute or all_to_all_v is priced by the load its transfers put on the
// links (Router, traffic.go): every transfer is routed, torus axes dimension-ordered
// (mesh axis order), each on its ring the short way round (an antipodal transfer on an
// even ring split half each way), a line straight, a one-way ring forward; a switched
// axis through the sender's egress and the receiver's ingress port; on a GPU model a
// transfer between nodes through the NICs of both nodes (one per GPU, shared by the
// node, rail-optimised), one inside a node through the NVLink ports. The bandwidth term
// is the busiest resource's bytes over its bandwidth; the latency term the largest base
// latency of the classes used plus the longest route (hops x α on rings, one step per
// switch), plus, for all_to_all_v, one α of the cheapest class for every peer message
// past the first that the busiest device posts. Callers describe a pattern by its
// representative transfers and the translates it repeats at (Traffic's Offsets), exact
// for translation-invariant patterns. The uniform all-to-all routed this way is exactly
// B.1's and B.2's formula. Where the transfers are a digit map (every device's digits
// permuted, with free digits for an exchange's several holders), PriceDigitPermutation
// and PriceDigitExchange give the same price without listing them: on a torus from
// per-axis line loads by digit classes (digitperm.go), summed from how many holders and
// receivers each coordinate has where that is cheaper than routing each transfer, with
// the same floats (digitcounts.go), on a GPU model from device port and node NIC loads
// counted from the digits against the node boundary (digitswitch.go); tests hold both
// to routing every transfer. Estimate still prices a p2p collective given without its
// transfers (a fallback): the slowest level of the group bounds it, and a shift by Hops
// on a ring loads each link Hops times.
//
// The latency term is Σ H·α over the levels plus the largest base latency of the links
// used; α is charged per physical hop: a step of a strided sub-axis spans its stride in
// links and pays α for each, as a routed transfer does. Estimate.Link is the level with the largest bandwidth term
// (for a permute, the bounding level). On a switch an all_to_all takes N-1 steps, the
// peer rounds NCCL schedules, as in COSTMODEL.md's worked example 10 (its B.1 table
// says 1).
//
// # GPU collectives as NCCL runs them
//
// A GPU model with a collectives block (every built-in GPU profile) prices
// all_gather, reduce_scatter, all_reduce and all_to_all over a group of D GPUs in each
// of M nodes as the least time over NCCL's algorithms (nccl.go, COSTMODEL.md B.5): ring
// (the node's NICs carry its channels together), tree and, where the NVSwitch reduces,
// nvls and nvls_tree all_reduce, collnet where the network reduces, direct all_to_all;
// each with fitted efficiencies of the NVLink and NIC figures, an efficiency curve over
// nccl-tests' size and a latency. An axis larger than a node is split into its GPUs in
// each node and the nodes (parts). collectives.p2p sets the transport of point-to-point
// moves between nodes (its per-pair rate and per-message overhead). Fit (fit.go) fits
// the figures to nccl-tests measurements (MeasurementsOf reads package nccltests'
// output) and reports each point's error.
//
// # Combining latency and bandwidth
//
// The default "additive" mode prices T = L + B, as NCCL's tuner, PyTorch DTensor and
// Inductor, Alpa and XLA's auto-sharding do, and as scaling-book's updated TPU quiz 5
// says. "max" mode prices T = max(L, B): that is scaling-book's form in its collective
// derivations (sharding.md L344, L360) and the roofline view; it is never larger.
//
// # Profiles and custom models
//
// The built-in profiles (tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, a100, h100, h200, b200,
// gb200-nvl72) are embedded JSON under profiles/, every figure with its source; they
// are listed by Profiles and Lookup and built by Profile. Resolve reads a request's
// cost_model (a profile name, or an object: a base profile plus overrides, or a whole
// custom model), and New builds a model from a ProfileInfo. Uniform is a fixed-figure
// model for tests. LowerBound gives the physical lower bounds of section (c); Estimate
// never returns less.
//
// The package keeps no mutable state: models are immutable once built, and the
// embedded profiles are parsed once.
package cost
