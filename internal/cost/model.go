package cost

import (
	"github.com/shardplan/shardplan/internal/collective"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Kind is a collective's kind (package collective names them); the values are the step
// ops of API.md.
type Kind = collective.Kind

// The collective kinds.
const (
	AllGather         = collective.AllGather
	ReduceScatter     = collective.ReduceScatter
	AllReduce         = collective.AllReduce
	AllToAll          = collective.AllToAll
	CollectivePermute = collective.CollectivePermute
	AllToAllV         = collective.AllToAllV
)

// Collective is one collective to price. The group is every set of devices that differ
// only in their coordinates on Axes (full mesh axes or sub-axes).
type Collective struct {
	Kind Kind
	// Bytes follows COSTMODEL.md B.0: the full array V of the group for all_gather
	// (output), reduce_scatter (input), all_reduce and all_to_all (total across the
	// group); for collective_permute and all_to_all_v, the most bytes any one device
	// sends or receives.
	Bytes int64
	Mesh  *sharding.Mesh
	Axes  []sharding.AxisRef
	// Hops is, for collective_permute and all_to_all_v, the largest distance (in ring
	// steps along the group's axes) any transfer travels; 0 means 1.
	Hops int
}

// Estimate is the priced time of one collective, in microseconds, split into its
// latency and bandwidth terms, with the link class that bounds it ("ici", "nvlink",
// "ib", "dcn").
type Estimate struct {
	TimeUS      float64 `json:"time_us"`
	LatencyUS   float64 `json:"latency_us"`
	BandwidthUS float64 `json:"bandwidth_us"`
	Link        string  `json:"link"`
}

// Model prices collectives. Implementations must be safe for concurrent use and
// deterministic; time must not decrease as Bytes grows.
type Model interface {
	Name() string
	Estimate(c Collective) Estimate
}
