// Package transfer plans moves of tensors between placements on one fabric: a source
// placement (a trainer, say FSDP x TP on 256 GPUs) and one or more target placements
// (inference replicas, each needing its own copy), each a mesh whose positions map to
// global device ids.
//
// # The judge
//
// Every tensor is cut into cells: the boxes between every tile boundary of the source
// and the target sharding. A cell has its holders (the source devices whose tile holds
// it) and its needers (the target devices, over every replica, whose tile holds it).
// A plan is a list of moves (a piece of a cell, from a device to a device, in a phase);
// a move may only send what its sender held when the phase began. Bound (bound.go) is
// the least time any schedule can take on the fabric's links: each node's network
// ingress and egress, each device's ingress and the holders' egress of what only they
// hold.
//
// # The strategies
//
//	direct   every target device pulls each cell it lacks from a holder (one in its
//	         node when there is one, else the least loaded), in one phase
//	fanout   every target node fetches each cell its devices need once over the
//	         network (split among the needers in the node, or fetched by an idle NIC
//	         of the node that relays it), then fans it out over NVLink (a scatter
//	         over the network, then an all_gather inside the node)
//	spread   what a source node holds leaves through every NIC of the node: a
//	         device whose NIC is idle takes a cell from its holder over NVLink and
//	         sends it on (a source-side scatter before the network)
//	chain    the first replica pulls directly, each next replica copies from the
//	         previous one position by position (a pipelined chain: the source sends
//	         each byte about once)
//	tree     as chain, each replica copying from its parent in a binary tree
//	mixed    each distinct tensor with the strategy cheapest for it alone
//
// Senders send slices of their tiles (a source-side slice costs nothing).
//
// # Prices and buckets
//
// Moves are priced on the fabric's links (Fabric, from a cost model with GPUs per
// node): a move inside a node loads the sender's NVLink egress and the receiver's
// NVLink ingress; a move between nodes loads the sender's NIC egress and the receiver's
// NIC ingress (one NIC per GPU). Work is done per class: tensors of the same shape,
// dtype and sharding pair share their cells and moves, and count as many times as
// there are tensors. Every tensor's moves run in buckets that pipeline through the
// phases: with K buckets and per-bucket phase times p_j, the time is Σ p_j + (K-1)·P,
// P the period: the slowest phase, or the busiest link's load over all phases per
// bucket. K is chosen for the least time within the request's memory budget (each
// device stages two buckets of what it sends and forwards).
package transfer
