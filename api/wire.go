package api

import (
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The wire types of the domain values an answer carries: a step's transfers and runs,
// a plan's candidates, a device's tile, an index's owners, a graph's propagation
// counts, a cost model and a field error. The answers and the OpenAPI document name
// these, never a domain package's type. Each has the JSON names, order and omitempty
// rules of the domain type it mirrors, so an answer's bytes are those of the domain
// value; where the fields are the same, the converter is a Go conversion, which stops
// compiling when the domain type gains, loses or reorders a field.

// Transfer is one point-to-point move of an all_to_all_v step, a halo
// collective_permute or a reshard's include "transfers": device from sends device to
// the global ranges, read from and written to the local ranges in the two devices'
// buffers.
type Transfer struct {
	// From is the sending device's id.
	From int `json:"from" example:"6"`
	// To is the receiving device's id.
	To int `json:"to" example:"2"`
	// Ranges are the global [start, end) per tensor dim of the data moved.
	Ranges [][2]int64 `json:"ranges"`
	// SourceLocal are the same elements' [start, end) per dim in the sender's buffer.
	SourceLocal [][2]int64 `json:"source_local"`
	// TargetLocal are the same elements' [start, end) per dim in the receiver's buffer.
	TargetLocal [][2]int64 `json:"target_local"`
	// Bytes is the size of the move in bytes.
	Bytes int64 `json:"bytes" example:"2097152"`
} // @name Transfer

// PairRun is count collective_permute pairs: [from + i*from_step, to + i*to_step] for i
// in [0, count).
type PairRun struct {
	// From is the first pair's sender.
	From int `json:"from" example:"0"`
	// To is the first pair's receiver.
	To int `json:"to" example:"4"`
	// FromStep is added to the sender from one pair to the next.
	FromStep int `json:"from_step" example:"1"`
	// ToStep is added to the receiver from one pair to the next.
	ToStep int `json:"to_step" example:"1"`
	// Count is the number of pairs in the run.
	Count int `json:"count" example:"4"`
} // @name PairRun

// TransferRun is count transfers: the i-th is first with i times step added to every
// number (from, to, each range bound, bytes).
type TransferRun struct {
	// First is the run's first transfer.
	First Transfer `json:"first"`
	// Step is what each transfer adds to the one before, number by number.
	Step Transfer `json:"step"`
	// Count is the number of transfers in the run.
	Count int `json:"count" example:"4"`
} // @name TransferRun

// Candidate is a plan the planner priced and compared (summary.candidates).
type Candidate struct {
	// Name says where the plan came from: greedy, search, all_to_all_v,
	// gather_then_slice, xla, or a hybrid's name.
	Name string `json:"name" example:"all_to_all_v"`
	// Steps is the number of collectives of the plan.
	Steps int `json:"steps" example:"1"`
	// TimeUS is the plan's time under the cost model, in µs.
	TimeUS float64 `json:"time_us" example:"24.3"`
	// BytesPerDevice is the most any device receives over the plan.
	BytesPerDevice int64 `json:"bytes_per_device" example:"2097152"`
	// Chosen is true for the plan the answer's steps are.
	Chosen bool `json:"chosen"`
} // @name Candidate

// DeviceTile is what one device holds: its mesh coordinates, the global [start, end)
// per dim, its padded local shape and the padding at the end of each dim.
type DeviceTile struct {
	// Device is the device id.
	Device int `json:"device" example:"10"`
	// Coords are the device's coordinates on the mesh axes, in mesh order.
	Coords []int `json:"coords" example:"2,2"`
	// Ranges are the global [start, end) per tensor dim the device holds.
	Ranges [][2]int64 `json:"ranges"`
	// LocalShape is the padded local buffer shape.
	LocalShape []int64 `json:"local_shape" example:"6,6"`
	// Padding is the padding at the end of each dim of the local buffer.
	Padding []int64 `json:"padding" example:"0,1"`
} // @name DeviceTile

// Owner is a device holding a located element, with the element's index in its local
// buffer.
type Owner struct {
	// Device is the device id.
	Device int `json:"device" example:"10"`
	// Coords are the device's coordinates on the mesh axes, in mesh order.
	Coords []int `json:"coords" example:"2,2"`
	// LocalIndex is the element's index in the device's local buffer.
	LocalIndex []int64 `json:"local_index" example:"1,5"`
} // @name Owner

// GraphStats counts the work of a graph's propagation.
type GraphStats struct {
	// Visits is the number of op visits over every pass.
	Visits int `json:"visits" example:"17"`
	// Updates is the number of tensor dims that gained axes.
	Updates int `json:"updates" example:"4"`
	// Passes is the number of fixpoint runs (user priorities x op-priority stages x
	// strategies).
	Passes int `json:"passes" example:"5"`
} // @name GraphStats

// FieldError is one invalid value of a request.
type FieldError struct {
	// Field is the value's path in the request as sent.
	Field string `json:"field" example:"source.dims[1].axes[0]"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message" example:"unknown mesh axis \"q\" (mesh axes: x, y)"`
} // @name FieldError

// CostModel is a cost model as GET /v1/cost-models lists it; the document is itself a
// valid cost_model object of a request.
type CostModel struct {
	// Name is the profile's name.
	Name string `json:"name" example:"h100"`
	// Aliases are other names a request may give the profile by.
	Aliases []string `json:"aliases,omitempty" example:"h100-dgx,h100-nvlink"`
	// Description says what hardware the profile describes.
	Description string `json:"description,omitempty"`
	// Mode is how the latency and bandwidth terms combine: "additive" (T = L + B, the
	// default) or "max" (T = max(L, B), scaling-book's form).
	Mode string `json:"mode" enums:"additive,max" example:"additive"`
	// Hierarchy is how the levels of a group that spans several link classes combine:
	// "sequential" (the phases add up, the default) or "overlapped" (pipelined: the
	// slowest phase bounds).
	Hierarchy string `json:"hierarchy" enums:"sequential,overlapped" example:"sequential"`
	// Efficiency scales every bandwidth: the achievable fraction of the peak, in (0, 1].
	Efficiency float64 `json:"efficiency" example:"1"`
	// GPUsPerNode > 0 makes a GPU model: a group axis whose device span fits in a node
	// rides "nvlink", any other "ib". 0 (absent) puts every axis on "ici".
	GPUsPerNode int `json:"gpus_per_node,omitempty" example:"8"`
	// AxisLinks overrides the link class of mesh axes by name.
	AxisLinks map[string]string `json:"axis_links,omitempty"`
	// Links are the figures per link class ("ici", "nvlink", "ib", "dcn").
	Links map[string]CostModelLink `json:"links"`
	// Collectives, on a GPU model, prices all_gather, reduce_scatter, all_reduce and
	// all_to_all as NCCL runs them and gives the transport of point-to-point moves
	// (COSTMODEL.md B.5); absent, the formulas of B.1-B.4 price them.
	Collectives *CostModelCollectives `json:"collectives,omitempty"`
	// Sources cite the model-level figures (gpus_per_node).
	Sources map[string]string `json:"sources,omitempty"`
} // @name CostModel

// CostModelCollectives are the figures of NCCL's algorithms on a GPU model.
type CostModelCollectives struct {
	// NVLS: the NVSwitch reduces (H100 and later): the nvls and nvls_tree all_reduce.
	NVLS bool `json:"nvls,omitempty"`
	// CollNet: the network reduces in its switches (InfiniBand SHARP).
	CollNet bool `json:"collnet,omitempty"`
	// Algorithms are the figures per algorithm: ring, tree, nvls, nvls_tree, collnet,
	// alltoall (ring and alltoall required).
	Algorithms map[string]CostModelAlgorithm `json:"algorithms"`
	// P2P is the transport of point-to-point moves between nodes.
	P2P *CostModelP2P `json:"p2p,omitempty"`
	// Sources cite nvls and collnet.
	Sources map[string]string `json:"sources,omitempty"`
} // @name CostModelCollectives

// CostModelAlgorithm is one algorithm's figures: its bus bandwidth at nccl-tests size S
// is the link figures times its efficiencies times (S/(S + half))^curve_exponent; its
// latency the links' base latency plus base_latency_us plus its steps.
type CostModelAlgorithm struct {
	// NVLinkEfficiency is the fraction of the NVLink figure reached, in (0, 1].
	NVLinkEfficiency float64 `json:"nvlink_efficiency" example:"0.77"`
	// NetEfficiency is the fraction of the group's NICs in a node together, in (0, 1].
	NetEfficiency float64 `json:"net_efficiency" example:"0.9"`
	// HalfBytes is the size at which the bus bandwidth is half its plateau (one node).
	HalfBytes float64 `json:"half_bytes" example:"6291456"`
	// BaseLatencyUS is added to the links' base latency, in µs.
	BaseLatencyUS float64 `json:"base_latency_us" example:"15"`
	// NetHalfBytes replaces half_bytes for a group across nodes.
	NetHalfBytes float64 `json:"net_half_bytes" example:"8388608"`
	// NetLatencyUS is added for a group across nodes, in µs.
	NetLatencyUS float64 `json:"net_latency_us" example:"20"`
	// CurveExponent shapes the efficiency curve, in (0, 1]; absent: 1.
	CurveExponent float64 `json:"curve_exponent,omitempty" example:"1"`
	// Sources cite each figure, keyed by its JSON name.
	Sources map[string]string `json:"sources,omitempty"`
} // @name CostModelAlgorithm

// CostModelP2P is the transport of point-to-point moves between nodes.
type CostModelP2P struct {
	// Transport is "nccl" (send/recv) or "rdma" (one-sided writes).
	Transport string `json:"transport" enums:"nccl,rdma" example:"nccl"`
	// NetEfficiency is the fraction of a NIC's figure one pair reaches, in (0, 1].
	NetEfficiency float64 `json:"net_efficiency" example:"0.35"`
	// NVLinkEfficiency is the fraction of the NVLink figure inside a node (absent: 1).
	NVLinkEfficiency float64 `json:"nvlink_efficiency,omitempty" example:"0.8"`
	// MessageOverheadUS is added to a move between nodes, in µs.
	MessageOverheadUS float64 `json:"message_overhead_us" example:"5"`
	// Sources cite each figure, keyed by its JSON name.
	Sources map[string]string `json:"sources,omitempty"`
} // @name CostModelP2P

// CostModelLink is one link class's figures. Bandwidth is per link per direction (for
// a switch: the device's egress into it), in GB/s (1e9 B/s).
type CostModelLink struct {
	// BandwidthGBps is the bandwidth per link per direction in GB/s.
	BandwidthGBps float64 `json:"bandwidth_gbps" example:"450"`
	// LatencyUS is the latency of one step (hop) in µs.
	LatencyUS float64 `json:"latency_us" example:"0.6"`
	// BaseLatencyUS is paid once per collective (software launch), the largest over the
	// links a collective uses, in µs.
	BaseLatencyUS float64 `json:"base_latency_us" example:"6.6"`
	// Topology is "torus" (ring per axis, wrapped per wrap), "ring_bidi", "ring_uni",
	// "line" or "switch".
	Topology string `json:"topology" enums:"torus,ring_bidi,ring_uni,line,switch" example:"switch"`
	// Wrap is the wraparound rule of a torus: "always", "never", "size16" (an axis
	// wraps iff its size is 16) or "cube" (every axis on this link wraps iff all of
	// them are multiples of 4 and their product is a multiple of 64).
	Wrap string `json:"wrap,omitempty" enums:"always,never,size16,cube"`
	// LinksPerChip is the number of links of this class per chip (informational: the
	// times do not read it).
	LinksPerChip int `json:"links_per_chip,omitempty" example:"6"`
	// Sources cite each figure, keyed by its JSON name.
	Sources map[string]string `json:"sources,omitempty"`
} // @name CostModelLink

// wireList converts a domain list to its wire form, nil staying nil (an omitempty
// list stays absent, a required one null).
func wireList[D, W any](ds []D, of func(D) W) []W {
	if ds == nil {
		return nil
	}
	out := make([]W, len(ds))
	for i, d := range ds {
		out[i] = of(d)
	}
	return out
}

func transferOf(t planner.Transfer) Transfer {
	return Transfer{From: t.From, To: t.To, Ranges: t.Ranges, SourceLocal: t.SourceLocal, TargetLocal: t.TargetLocal, Bytes: t.Bytes}
}

// domain is t as the planner's value.
func (t Transfer) domain() planner.Transfer {
	return planner.Transfer{From: t.From, To: t.To, Ranges: t.Ranges, SourceLocal: t.SourceLocal, TargetLocal: t.TargetLocal, Bytes: t.Bytes}
}

func transfersOf(ts []planner.Transfer) []Transfer { return wireList(ts, transferOf) }

func transferRunOf(r planner.TransferRun) TransferRun {
	return TransferRun{First: transferOf(r.First), Step: transferOf(r.Step), Count: r.Count}
}

// Expand lists the transfers of r.
func (r TransferRun) Expand() []Transfer {
	return transfersOf(planner.TransferRun{First: r.First.domain(), Step: r.Step.domain(), Count: r.Count}.Expand())
}

func transferRunsOf(rs []planner.TransferRun) []TransferRun { return wireList(rs, transferRunOf) }

func pairRunsOf(rs []planner.PairRun) []PairRun {
	return wireList(rs, func(r planner.PairRun) PairRun { return PairRun(r) })
}

// Expand lists the pairs of r.
func (r PairRun) Expand() [][2]int { return planner.PairRun(r).Expand() }

func candidatesOf(cs []planner.Candidate) []Candidate {
	return wireList(cs, func(c planner.Candidate) Candidate { return Candidate(c) })
}

func deviceTilesOf(ts []sharding.DeviceTile) []DeviceTile {
	return wireList(ts, func(t sharding.DeviceTile) DeviceTile { return DeviceTile(t) })
}

func ownersOf(owners []sharding.Owner) []Owner {
	return wireList(owners, func(o sharding.Owner) Owner { return Owner(o) })
}

func graphStatsOf(s propagation.Stats) GraphStats { return GraphStats(s) }

func fieldErrorOf(e *sharding.FieldError) FieldError { return FieldError(*e) }

// domainFieldErrors is es as the domain's errors.
func domainFieldErrors(es []FieldError) sharding.Errors {
	out := make(sharding.Errors, len(es))
	for i, e := range es {
		fe := sharding.FieldError(e)
		out[i] = &fe
	}
	return out
}

func costModelOf(p cost.ProfileInfo) CostModel {
	links := make(map[string]CostModelLink, len(p.Links))
	for k, l := range p.Links {
		links[k] = CostModelLink(l)
	}
	if p.Links == nil {
		links = nil
	}
	return CostModel{Name: p.Name, Aliases: p.Aliases, Description: p.Description, Mode: p.Mode, Hierarchy: p.Hierarchy,
		Efficiency: p.Efficiency, GPUsPerNode: p.GPUsPerNode, AxisLinks: p.AxisLinks, Links: links,
		Collectives: collectivesOf(p.Collectives), Sources: p.Sources}
}

func collectivesOf(c *cost.CollectivesInfo) *CostModelCollectives {
	if c == nil {
		return nil
	}
	var algos map[string]CostModelAlgorithm
	if c.Algorithms != nil {
		algos = make(map[string]CostModelAlgorithm, len(c.Algorithms))
	}
	for k, a := range c.Algorithms {
		algos[k] = CostModelAlgorithm(a)
	}
	out := &CostModelCollectives{NVLS: c.NVLS, CollNet: c.CollNet, Algorithms: algos, Sources: c.Sources}
	if c.P2P != nil {
		q := CostModelP2P(*c.P2P)
		out.P2P = &q
	}
	return out
}
