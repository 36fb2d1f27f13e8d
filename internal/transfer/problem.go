package transfer

import (
	"fmt"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Placement is a mesh on the fabric: Devices[p] is the global id of the device at
// row-major mesh position p.
type Placement struct {
	Name    string
	Field   string // its path in the request ("source", "targets[2]")
	Mesh    *sharding.Mesh
	Devices []int
}

// Tensor is one tensor (or Count tensors of the same shape, dtype and shardings) to
// move: its source sharding is on the source placement's mesh, its target sharding on
// every target's.
type Tensor struct {
	Name     string
	Field    string
	Shape    []int64
	ElemBits int
	Source   sharding.Sharding
	Target   sharding.Sharding
	// TargetBits is the target's element width when the tensor is cast on the way (a
	// quantized target, 0: ElemBits); ScaleBits are the bits of scale tensors per
	// element of the target (a scale of s bits per block of b elements: s/b). CastAfter
	// casts on the receiver: moves carry ElemBits; else the sender casts its slice and
	// moves carry TargetBits plus the scales.
	TargetBits int
	ScaleBits  float64
	CastAfter  bool
	// Count is how many tensors this entry stands for (a repeated layer); Names names
	// each of them on demand (Names.Count() == Count; zero: the one tensor Name).
	Count int
	Names Names
	// Fused, when set, makes this tensor one part of a fused target tensor: Target is
	// then the fused tensor's sharding (over Fused.Shape) and the part lands at
	// Fused.Offset along Fused.Dim. Moves keep the part's own index space.
	Fused *FusedPart
}

// FusedPart places a source tensor inside a fused target tensor: the fused tensor is
// its parts concatenated along Dim, this part at [Offset, Offset+Shape[Dim]) of it.
type FusedPart struct {
	Shape  []int64 // the fused tensor's shape
	Dim    int
	Offset int64
	// Entry tells fused tensors apart: the parts of one fused target share it. Name
	// and Names name the fused tensor (its k-th when the parts repeat, as Tensor's).
	Entry int
	Name  string
	Names Names
}

// NameAt is the name of the k-th tensor the entry stands for.
func (t *Tensor) NameAt(k int) string {
	if t.Names.I == 0 {
		return t.Name
	}
	return t.Names.At(k)
}

// Problem is a validated transfer request.
type Problem struct {
	Fabric  *Fabric
	Devices int // the fabric's device count: ids are 0..Devices-1
	Source  Placement
	Targets []Placement
	Tensors []Tensor
	// MemoryBudget bounds the bytes any device holds at any time (0: none).
	MemoryBudget int64
	// Strategy forces one strategy by name ("" or "auto": the cheapest).
	Strategy string
	// MaxBuckets bounds the bucket count (0: DefaultMaxBuckets).
	MaxBuckets int
	// MaxMoves bounds the moves the plan may make over all classes (0: DefaultMaxMoves).
	MaxMoves int
	// MaxCells bounds the cells of all classes together (0: DefaultMaxCells).
	MaxCells int

	// nodeMap maps a compacted problem's nodes to the fabric's (nil: not compacted).
	nodeMap []int
}

// Limits of the planning work.
const (
	DefaultMaxBuckets = 1 << 14
	DefaultMaxMoves   = 1 << 22
	DefaultMaxCells   = 1 << 22
)

// LimitError is a request over one of the planner's limits (moves, cells): Field names
// the request field that shrinks it.
type LimitError struct {
	Field string
	Msg   string
}

func (e *LimitError) Error() string { return e.Field + ": " + e.Msg }

func limitErrorf(field, format string, args ...any) *LimitError {
	return &LimitError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Strategies are the strategy names, in the order candidates are listed.
var Strategies = []string{"direct", "fanout", "spread", "chain", "tree", "mixed"}

// Fabric is the view of a GPU cost model that transfers are priced on: nodes of
// GPUsPerNode consecutive device ids, each GPU with an NVLink port and one NIC, both
// full duplex. Bandwidths are bytes per µs per direction, efficiency applied.
type Fabric struct {
	Name        string
	GPUsPerNode int
	// NVLinkBW and NICBW are one pair's rates on the model's transport
	// (collectives.p2p: a fraction of the links' figures): what prices and bounds
	// every schedule of moves.
	NVLinkBW  float64
	NICBW     float64
	NVLinkLat float64 // per step
	// NICOverhead is the µs a message between nodes adds (collectives.p2p).
	NICOverhead float64
	NICLat      float64 // per step
	Base        float64 // per phase (launch)
	Additive    bool
}

// FabricOf reads m's figures. Transfers need a GPU model (gpus_per_node > 0, with
// nvlink and ib links): the error names field.
func FabricOf(m cost.Model, field string) (*Fabric, error) {
	f, ok := m.(*cost.Fabric)
	if !ok {
		return nil, fielderr.New(field, "transfers are priced on a fabric model; give a profile name such as \"h100\"")
	}
	info := f.Info()
	if info.GPUsPerNode <= 0 {
		return nil, fielderr.New(field, "model %q has no GPU nodes (gpus_per_node is 0): transfers are priced on GPU models (nodes of NVLink GPUs joined by NICs), e.g. \"h100\", \"b200\"", info.Name)
	}
	nv, okNV := info.Links["nvlink"]
	ib, okIB := info.Links["ib"]
	if !okNV || !okIB {
		return nil, fielderr.New(field, "model %q needs both an nvlink and an ib link to price transfers", info.Name)
	}
	eff := info.Efficiency
	if eff == 0 {
		eff = 1
	}
	line := ib.BandwidthGBps * eff * 1e3
	nvBW := nv.BandwidthGBps * eff * 1e3
	pair, over := line, 0.0
	if c := info.Collectives; c != nil && c.P2P != nil {
		pair, over = line*c.P2P.NetEfficiency, c.P2P.MessageOverheadUS
		if c.P2P.NVLinkEfficiency > 0 {
			nvBW *= c.P2P.NVLinkEfficiency
		}
	}
	return &Fabric{
		Name: info.Name, GPUsPerNode: info.GPUsPerNode,
		NVLinkBW: nvBW, NICBW: pair, NICOverhead: over,
		NVLinkLat: nv.LatencyUS, NICLat: ib.LatencyUS, Base: max(nv.BaseLatencyUS, ib.BaseLatencyUS),
		Additive: info.Mode != "max",
	}, nil
}

// Node is the node of global device id d.
func (f *Fabric) Node(d int) int { return d / f.GPUsPerNode }

func (f *Fabric) combine(lat, bw float64) float64 {
	if f.Additive {
		return lat + bw
	}
	return max(lat, bw)
}

// Validate checks the placements: one device id per mesh position, each inside the
// fabric and listed once per placement, a device in at most one replica, every replica
// with targets[0]'s axes, at least one target. Errors name the fields.
func (p *Problem) Validate() error {
	var es fielderr.Errors
	check := func(pl *Placement) {
		if len(pl.Devices) != pl.Mesh.NumDevices() {
			es = append(es, fielderr.New(pl.Field+".device_ids", "lists %d devices but the mesh %s has %d; give one global id per mesh position, row-major", len(pl.Devices), pl.Mesh, pl.Mesh.NumDevices()))
			return
		}
		seen := make(map[int]int, len(pl.Devices))
		for i, d := range pl.Devices {
			if d < 0 || d >= p.Devices {
				es = append(es, fielderr.New(fmt.Sprintf("%s.device_ids[%d]", pl.Field, i), "device %d is outside the fabric's ids 0..%d (fabric_devices %d)", d, p.Devices-1, p.Devices))
				continue
			}
			if j, dup := seen[d]; dup {
				es = append(es, fielderr.New(fmt.Sprintf("%s.device_ids[%d]", pl.Field, i), "device %d is listed twice in this placement (also at [%d])", d, j))
				continue
			}
			seen[d] = i
		}
	}
	check(&p.Source)
	owner := map[int]int{}
	for r := range p.Targets {
		t := &p.Targets[r]
		check(t)
		if r > 0 && !t.Mesh.SameLayout(p.Targets[0].Mesh) {
			es = append(es, fielderr.New(t.Field+".mesh", "replica mesh %s differs from targets[0]'s %s; every replica has the target shardings, so give them the same axes", t.Mesh, p.Targets[0].Mesh))
		}
		for i, d := range t.Devices {
			if o, dup := owner[d]; dup && o != r {
				es = append(es, fielderr.New(fmt.Sprintf("%s.device_ids[%d]", t.Field, i), "device %d is already in targets[%d]: a device belongs to at most one replica", d, o))
				continue
			}
			owner[d] = r
		}
	}
	if len(p.Targets) == 0 {
		es = append(es, fielderr.New("targets", "is empty: give at least one target placement"))
	}
	return es.Err()
}
