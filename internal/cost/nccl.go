package cost

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
)

// The algorithms a GPU model's collectives block can give figures for (COSTMODEL.md
// B.5), in the order Estimate tries them.
const (
	algoRing = iota
	algoTree
	algoNVLS
	algoNVLSTree
	algoCollNet
	algoAllToAll
	numAlgos
)

var algoNames = [numAlgos]string{"ring", "tree", "nvls", "nvls_tree", "collnet", "alltoall"}

// Transports of point-to-point moves between nodes.
var transports = []string{"nccl", "rdma"}

// algo is one algorithm's figures in Estimate's units.
type algo struct {
	defined bool
	effNV   float64 // fraction of the NVLink figure
	effNet  float64 // fraction of the NICs' figure
	half    float64 // bytes
	base    float64 // µs
	netHalf float64 // bytes, for a group across nodes
	netLat  float64 // µs added for a group across nodes
	gamma   float64 // the curve's exponent
}

// ncclFigures are a GPU model's collectives figures, validated.
type ncclFigures struct {
	nvls, collnet bool
	algos         [numAlgos]algo
}

// setCollectives checks p's collectives block (at field cf) and sets it on f.
func (f *Fabric) setCollectives(p *ProfileInfo, cf string) *fielderr.FieldError {
	c := p.Collectives
	if c == nil {
		return nil
	}
	if f.gpusPerNode == 0 {
		return fielderr.New(cf, "applies to GPU models only; set gpus_per_node or remove collectives")
	}
	if f.links[linkNVLink].topo != switched || f.links[linkIB].topo != switched {
		return fielderr.New(cf, "needs links.nvlink and links.ib with topology \"switch\"; remove collectives or make both switches")
	}
	fig := &ncclFigures{nvls: c.NVLS, collnet: c.CollNet}
	af := join(cf, "algorithms")
	for name, a := range c.Algorithms {
		i := -1
		for k, n := range algoNames {
			if n == name {
				i = k
			}
		}
		f2 := join(af, name)
		if i < 0 {
			return fielderr.New(f2, "unknown algorithm %q; use ring, tree, nvls, nvls_tree, collnet or alltoall", name)
		}
		for _, e := range []struct {
			v    float64
			name string
		}{{a.NVLinkEfficiency, "nvlink_efficiency"}, {a.NetEfficiency, "net_efficiency"}} {
			if !(e.v >= minEfficiency && e.v <= 1) {
				return fielderr.New(join(f2, e.name), "is %v; give the achieved fraction of the link figure in [%g, 1], e.g. 0.8", e.v, minEfficiency)
			}
		}
		for _, h := range []struct {
			v    float64
			name string
		}{{a.HalfBytes, "half_bytes"}, {a.NetHalfBytes, "net_half_bytes"}} {
			if !(h.v >= 0 && h.v <= 1e15) {
				return fielderr.New(join(f2, h.name), "is %v; give the size in bytes at which the bus bandwidth is half its plateau, between 0 and 1e15, e.g. 4194304", h.v)
			}
		}
		for _, l := range []struct {
			v    float64
			name string
		}{{a.BaseLatencyUS, "base_latency_us"}, {a.NetLatencyUS, "net_latency_us"}} {
			if !(l.v >= 0 && l.v <= maxLatencyUS) {
				return fielderr.New(join(f2, l.name), "is %v; give a latency in µs, between 0 and %g, e.g. 20", l.v, maxLatencyUS)
			}
		}
		fig.algos[i] = algo{defined: true, effNV: a.NVLinkEfficiency, effNet: a.NetEfficiency, half: a.HalfBytes, base: a.BaseLatencyUS,
			netHalf: a.NetHalfBytes, netLat: a.NetLatencyUS, gamma: 1}
		if a.CurveExponent != 0 {
			if !(a.CurveExponent >= 0.05 && a.CurveExponent <= 1) {
				return fielderr.New(join(f2, "curve_exponent"), "is %v; give the efficiency curve's exponent in [0.05, 1] (1: busbw = plateau x S/(S + half); above 1 a time would fall as bytes grow)", a.CurveExponent)
			}
			fig.algos[i].gamma = a.CurveExponent
		}
	}
	for _, need := range []int{algoRing, algoAllToAll} {
		if !fig.algos[need].defined {
			return fielderr.New(af, "needs %q (every GPU collective can run it); add algorithms.%s with nvlink_efficiency, net_efficiency, half_bytes and base_latency_us", algoNames[need], algoNames[need])
		}
	}
	if q := c.P2P; q != nil {
		qf := join(cf, "p2p")
		ok := false
		for _, t := range transports {
			ok = ok || q.Transport == t
		}
		if !ok {
			return fielderr.New(join(qf, "transport"), "unknown transport %q; use \"nccl\" (send/recv) or \"rdma\" (RDMA writes)", q.Transport)
		}
		if !(q.NetEfficiency >= minEfficiency && q.NetEfficiency <= 1) {
			return fielderr.New(join(qf, "net_efficiency"), "is %v; give the fraction of a NIC's figure one pair reaches in [%g, 1], e.g. 0.35", q.NetEfficiency, minEfficiency)
		}
		if !(q.MessageOverheadUS >= 0 && q.MessageOverheadUS <= maxLatencyUS) {
			return fielderr.New(join(qf, "message_overhead_us"), "is %v; give the µs one message adds, between 0 and %g", q.MessageOverheadUS, maxLatencyUS)
		}
		if q.NVLinkEfficiency != 0 && !(q.NVLinkEfficiency >= minEfficiency && q.NVLinkEfficiency <= 1) {
			return fielderr.New(join(qf, "nvlink_efficiency"), "is %v; give the fraction of the NVLink figure one pair reaches in [%g, 1] (or 0 for 1), e.g. 0.8", q.NVLinkEfficiency, minEfficiency)
		}
		f.p2pNIC = f.links[linkIB].bw * q.NetEfficiency
		if q.NVLinkEfficiency > 0 {
			f.p2pNV = f.links[linkNVLink].bw * q.NVLinkEfficiency
		}
		f.p2pOverhead = q.MessageOverheadUS
	}
	f.coll = fig
	return nil
}

// Scope names where a GPU group runs, as the fidelity tables group measurements.
type Scope string

// The scopes of a GPU group.
const (
	ScopeNode       Scope = "node"         // inside one node
	ScopeNodes      Scope = "nodes"        // several nodes, several GPUs of each
	ScopeGPUPerNode Scope = "gpu_per_node" // one GPU in each of several nodes
)

// ncclEstimate prices an all_gather, reduce_scatter, all_reduce or all_to_all of v
// bytes over a group of nvlink and ib levels (nested: class order) as NCCL runs it:
// the least time over the algorithms the model offers (COSTMODEL.md B.5). ok is false
// for other kinds and groups.
func (f *Fabric) ncclEstimate(kind Kind, nested []level, v float64) (Estimate, bool) {
	d, m := 1, 1
	for _, l := range nested {
		switch l.class {
		case linkNVLink:
			d = l.n
		case linkIB:
			m = l.n
		default:
			return Estimate{}, false
		}
	}
	switch kind {
	case AllGather, ReduceScatter, AllReduce, AllToAll:
	default:
		return Estimate{}, false
	}
	g := f.ncclGroup(d, m)
	best := Estimate{TimeUS: math.Inf(1)}
	for a := range numAlgos {
		if e, ok := f.algoTime(a, kind, g, v); ok && e.TimeUS < best.TimeUS {
			best = e
		}
	}
	return best, !math.IsInf(best.TimeUS, 0)
}

// ncclGroup is a group of d GPUs in each of m nodes on f's links.
type ncclGroup struct {
	d, m       int
	nv, nic    float64 // NVLink bytes/µs per GPU; the group's NICs in one node together
	latNV, lat float64 // per-step latency inside a node, between nodes
}

func (f *Fabric) ncclGroup(d, m int) ncclGroup {
	return ncclGroup{d: d, m: m, nv: f.links[linkNVLink].bw, nic: float64(d) * f.links[linkIB].bw,
		latNV: f.links[linkNVLink].lat, lat: f.links[linkIB].lat}
}

// algoTime prices kind on g with algorithm a: bandwidth term, latency and the link
// class that bounds it. ok is false when a does not run kind on g or has no figures.
func (f *Fabric) algoTime(a int, kind Kind, g ncclGroup, v float64) (Estimate, bool) {
	al := f.coll.algos[a]
	if !al.defined {
		return Estimate{}, false
	}
	n := float64(g.d * g.m)
	multi, intra := g.m > 1, g.d > 1
	inter := float64(g.m - 1)
	log2m := math.Ceil(math.Log2(float64(g.m)))
	// netBytes is how much a node sends per byte of an all_reduce's array through its
	// NICs on a double binary tree: each half of the array goes up one tree and down
	// the other; with two nodes every node is a leaf of one and the root of the other.
	netBytes := 2.0
	if g.m == 2 {
		netBytes = 1
	}
	nvT := func(bytes float64) float64 { return bytes / (al.effNV * g.nv) }
	netT := func(bytes float64) float64 { return bytes / (al.effNet * g.nic) }
	var tNV, tNet float64 // bandwidth times on NVLink and NICs
	size := v             // nccl-tests' size: what the efficiency curve is over
	switch a {
	case algoRing:
		if kind == AllToAll {
			return Estimate{}, false
		}
		// One flat ring through every GPU; the node's channels leave it on all of its
		// NICs, so a node's NICs carry the ring's bus bandwidth together.
		factor, hops := (n-1)/n, 1.0
		if kind == AllReduce {
			factor, hops = 2*(n-1)/n, 2
		}
		if intra {
			tNV = nvT(factor * v)
		}
		if multi {
			tNet = netT(factor * v)
		}
		return f.algoEstimate(al, multi, tNV, tNet, size, hops*((n-1)-inter)*g.latNV+hops*inter*g.lat), true
	case algoTree:
		if kind != AllReduce || !multi {
			return Estimate{}, false
		}
		// A chain inside each node (each GPU sends the array up and down it), double
		// binary trees between nodes.
		if intra {
			tNV = nvT(2 * v)
		}
		tNet = netT(netBytes * v)
		return f.algoEstimate(al, multi, tNV, tNet, size, 2*(float64(g.d-1)*g.latNV+log2m*g.lat)), true
	case algoNVLS:
		if kind != AllReduce || multi || !intra || !f.coll.nvls {
			return Estimate{}, false
		}
		// The switch reduces: every GPU sends its array once and receives the sum once.
		return f.algoEstimate(al, multi, nvT(v), 0, size, g.latNV), true
	case algoNVLSTree:
		if kind != AllReduce || !multi || !intra || !f.coll.nvls {
			return Estimate{}, false
		}
		return f.algoEstimate(al, multi, nvT(v), netT(netBytes*v), size, g.latNV+2*log2m*g.lat), true
	case algoCollNet:
		if kind != AllReduce || !multi || !f.coll.collnet {
			return Estimate{}, false
		}
		// The network reduces: a node sends its array once and receives the sum once.
		if intra {
			tNV = nvT(v)
		}
		return f.algoEstimate(al, multi, tNV, netT(v), size, g.latNV+g.lat), true
	case algoAllToAll:
		if kind != AllToAll {
			return Estimate{}, false
		}
		// Direct sends: each GPU sends v/n² to every peer, over NVLink inside its node
		// and through its own NIC to the others.
		per := v / (n * n)
		if intra {
			tNV = nvT(float64(g.d-1) * per)
		}
		if multi {
			tNet = (float64(g.d*g.m-g.d) * per) / (al.effNet * g.nic / float64(g.d))
		}
		size = v / n
		return f.algoEstimate(al, multi, tNV, tNet, size, float64(g.d-1)*g.latNV+inter*g.lat), true
	}
	return Estimate{}, false
}

// algoEstimate combines an algorithm's NVLink and NIC times (pipelined: the slower
// bounds), stretched by its efficiency curve at size, with its latency.
func (f *Fabric) algoEstimate(al algo, multi bool, tNV, tNet, size, stepLat float64) Estimate {
	e := Estimate{Link: "nvlink"}
	bw := tNV
	if tNet > tNV {
		bw, e.Link = tNet, "ib"
	}
	// The links' base latency (a launch) is paid as by every collective: the floor
	// the planner's bounds count on (LatencyFloors).
	half, lat := al.half, f.links[linkNVLink].base+al.base+stepLat
	if multi {
		half, lat = al.netHalf, max(f.links[linkNVLink].base, f.links[linkIB].base)+al.base+al.netLat+stepLat
	}
	if size > 0 && half > 0 {
		if al.gamma == 1 {
			bw *= 1 + half/size
		} else {
			bw *= math.Pow(1+half/size, al.gamma)
		}
	}
	e.BandwidthUS = bw
	e.LatencyUS = lat
	e.TimeUS = f.combine(e.LatencyUS, e.BandwidthUS)
	return e
}

// collectivesKey is the canonical text of c's figures (sources left out), for
// fingerprints and cache keys; "" for nil.
func collectivesKey(c *CollectivesInfo) string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nvls=%t collnet=%t", c.NVLS, c.CollNet)
	for _, k := range sortedKeys(c.Algorithms) {
		a := c.Algorithms[k]
		fmt.Fprintf(&b, " %s=%g/%g/%g/%g/%g/%g/%g", k, a.NVLinkEfficiency, a.NetEfficiency, a.HalfBytes, a.BaseLatencyUS, a.NetHalfBytes, a.NetLatencyUS, a.CurveExponent)
	}
	if q := c.P2P; q != nil {
		fmt.Fprintf(&b, " p2p=%s/%g/%g/%g", q.Transport, q.NetEfficiency, q.NVLinkEfficiency, q.MessageOverheadUS)
	}
	return b.String()
}

var (
	collectivesFields = []string{"algorithms", "collnet", "nvls", "p2p", "sources"}
	algorithmFields   = []string{"base_latency_us", "curve_exponent", "half_bytes", "net_efficiency", "net_half_bytes", "net_latency_us", "nvlink_efficiency", "sources"}
	p2pFields         = []string{"message_overhead_us", "net_efficiency", "nvlink_efficiency", "sources", "transport"}
)

// mergeCollectives applies a request's collectives object to c (a copy is returned):
// algorithms and p2p merge per figure, sources per key; a figure the request sets is
// cited as given in the request.
func mergeCollectives(c *CollectivesInfo, raw json.RawMessage, field string) (*CollectivesInfo, *fielderr.FieldError) {
	obj, err := object(raw, field, collectivesFields)
	if err != nil {
		return nil, err
	}
	out := c.clone()
	if out == nil {
		out = &CollectivesInfo{}
	}
	if out.Algorithms == nil {
		out.Algorithms = map[string]AlgorithmInfo{}
	}
	for _, k := range sortedKeys(obj) {
		v, f := obj[k], join(field, k)
		switch k {
		case "nvls", "collnet":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return nil, fielderr.New(f, "must be true or false, not %s", jsonKind(v))
			}
			if k == "nvls" {
				out.NVLS = b
			} else {
				out.CollNet = b
			}
			out.Sources = setSource(out.Sources, k)
		case "sources":
			if out.Sources, err = mergeStrings(out.Sources, v, f); err != nil {
				return nil, err
			}
		case "algorithms":
			algos, err := object(v, f, nil)
			if err != nil {
				return nil, err
			}
			for _, name := range sortedKeys(algos) {
				af := join(f, name)
				fields, err := object(algos[name], af, algorithmFields)
				if err != nil {
					return nil, err
				}
				a := out.Algorithms[name]
				a.Sources = maps.Clone(a.Sources)
				for _, fk := range sortedKeys(fields) {
					fv, ff := fields[fk], join(af, fk)
					var err *fielderr.FieldError
					switch fk {
					case "nvlink_efficiency":
						a.NVLinkEfficiency, err = num(fv, ff)
					case "net_efficiency":
						a.NetEfficiency, err = num(fv, ff)
					case "half_bytes":
						a.HalfBytes, err = num(fv, ff)
					case "base_latency_us":
						a.BaseLatencyUS, err = num(fv, ff)
					case "net_half_bytes":
						a.NetHalfBytes, err = num(fv, ff)
					case "curve_exponent":
						a.CurveExponent, err = num(fv, ff)
					case "net_latency_us":
						a.NetLatencyUS, err = num(fv, ff)
					case "sources":
						a.Sources, err = mergeStrings(a.Sources, fv, ff)
					}
					if err != nil {
						return nil, err
					}
					if fk != "sources" {
						a.Sources = setSource(a.Sources, fk)
					}
				}
				out.Algorithms[name] = a
			}
		case "p2p":
			fields, err := object(v, f, p2pFields)
			if err != nil {
				return nil, err
			}
			q := P2PInfo{}
			if out.P2P != nil {
				q = *out.P2P
				q.Sources = maps.Clone(q.Sources)
			}
			for _, fk := range sortedKeys(fields) {
				fv, ff := fields[fk], join(f, fk)
				var err *fielderr.FieldError
				switch fk {
				case "transport":
					q.Transport, err = str(fv, ff)
				case "net_efficiency":
					q.NetEfficiency, err = num(fv, ff)
				case "nvlink_efficiency":
					q.NVLinkEfficiency, err = num(fv, ff)
				case "message_overhead_us":
					q.MessageOverheadUS, err = num(fv, ff)
				case "sources":
					q.Sources, err = mergeStrings(q.Sources, fv, ff)
				}
				if err != nil {
					return nil, err
				}
				if fk != "sources" {
					q.Sources = setSource(q.Sources, fk)
				}
			}
			out.P2P = &q
		}
	}
	return out, nil
}
