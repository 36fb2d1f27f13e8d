package cost

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Traffic is a point-to-point step described by its transfers, for pricing by the load
// they put on the links (COSTMODEL.md (c), "collective-permute": max(V_dev/E, max link
// load / W)). Transfers name mesh coordinates (row-major axis order), so the router
// knows which ring each part of a route rides.
//
// Offsets lets a caller describe a pattern by one representative and its translates:
// Offsets[i] == nil means the transfers give axis i's coordinates in full; otherwise the
// transfers give the coordinates of the varying part only and the whole pattern repeats
// at each offset o in Offsets[i] (o added to both ends' coordinate on axis i). This is
// exact when the pattern is invariant under those translations: the same transfers,
// with the same bytes, at every offset. An axis no transfer moves along and whose
// coordinate does not change the bytes is all offsets 0..n-1 (see AllOffsets).
type Traffic struct {
	Kind    Kind // CollectivePermute or AllToAllV
	Mesh    *sharding.Mesh
	Offsets [][]int
	// Each calls yield for every representative transfer: from and to are mesh
	// coordinates (read-only, valid during the call only), bytes > 0. It stops when
	// yield returns false.
	Each func(yield func(from, to []int, bytes int64) bool)
}

// AllOffsets is the offset list of an axis of size n that the pattern repeats along in
// full: 0, 1, ..., n-1.
func AllOffsets(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TrafficEstimate is the priced traffic: the Estimate plus what bounds it.
type TrafficEstimate struct {
	Estimate
	// MaxLinkBytes is the load of the busiest resource (a directed torus link, a
	// device's switch port or a node's NICs); Resource names it.
	MaxLinkBytes float64

	worst  worstRes
	router *Router
	// MaxHops is the longest route in physical hops; MaxPeers the most transfers one
	// device sends or receives.
	MaxHops  int
	MaxPeers int
	Bytes    int64 // every byte moved, all devices
}

// axisRoute is how one mesh axis is routed on a fabric.
type axisRoute struct {
	class    linkClass
	topo     topology // ringBidi, ringUni, line or switched; nodeSwitched for gpu axes
	n        int
	bw       float64 // bytes per µs per link (ring) or per port (switch)
	lat      float64
	override bool // class from axis_links (not decided per transfer)
}

// routes resolves every mesh axis of m on f. On a GPU model (gpus_per_node > 0) an
// axis without an axis_links entry is decided per transfer: nvlink when both ends sit
// in one node (row-major position / gpus_per_node), ib otherwise.
func (f *Fabric) routes(m *sharding.Mesh) []axisRoute {
	if r := f.lastRoutes.Load(); r != nil && r.mesh == m {
		return r.routes
	}
	out := f.resolveRoutes(m)
	f.lastRoutes.Store(&meshRoutes{m, out})
	return out
}

// meshRoutes is a mesh's routes, kept for the next call on the same mesh (a request
// asks for them from the router, the heuristic's bounds and the cut bound). Callers
// only read them.
type meshRoutes struct {
	mesh   *sharding.Mesh
	routes []axisRoute
}

// resolveRoutes is routes, computed.
func (f *Fabric) resolveRoutes(m *sharding.Mesh) []axisRoute {
	out := make([]axisRoute, len(m.Axes))
	for i, a := range m.Axes {
		r := axisRoute{n: a.Size}
		c, ok := f.axisLinks[a.Name]
		switch {
		case ok:
			r.class, r.override = c, true
		case f.gpusPerNode > 0:
			r.class = linkNVLink // refined per transfer
		default:
			r.class = linkICI
		}
		l := &f.links[r.class]
		r.topo, r.bw, r.lat = l.topo, l.bw, l.lat
		if r.topo == torus {
			r.topo = line
			if f.wraps(m, r.class, l.wrap, a.Size) {
				r.topo = ringBidi
			}
		}
		if f.gpusPerNode > 0 && !ok {
			r.topo = switched
		}
		if r.topo == ringBidi && a.Size <= 2 {
			r.topo = line // a ring of 2 is one link pair: no second way round
		}
		out[i] = r
	}
	return out
}

// Router prices Traffic on one fabric and mesh. It keeps scratch buffers between calls,
// so reuse one per goroutine (a planner request); it is not safe for concurrent use.
type Router struct {
	f      *Fabric
	m      *sharding.Mesh
	rt     []axisRoute
	stride []int // row-major stride per axis
	n      int   // devices

	// Loads of one Price call, kept sparse: only touched lines and devices are
	// visited, and a generation number marks what belongs to the current call.
	gen     uint32
	ring    []ringLoads
	devGen  []uint32
	cnt     [2][]int32 // transfers sent and received per device (valid where devGen is current)
	touched []int32    // devices with counts this call
	devSlot []int32
	devs    []devLoad // switch port loads of touched devices
	node    [2][]float64
	scratch []float64
	// PriceDigitPermutation's per-axis loads (axisLoad), by key, and the key's buffer.
	axisLoads map[string]axisLoadRes
	loadKey   []byte
	tables    []float64 // routeMax.eliminate's (tableFloats)

	// PriceDigitPermutation's buffers and its memo of what does not depend on the bytes.
	dOnAxis    [][]int
	dSSet      []uint64
	dKey       []byte
	digitUnits map[string]*digitUnit
	// memo is what every router of poolKey has computed (unitmemo.go; nil: not pooled);
	// digitUnits and axisLoads are this router's copies of what it has looked up.
	memo *unitMemo

	poolKey string  // AcquireRouter's key ("": not pooled)
	caches  *Caches // the pool Release gives the router back to (nil: not pooled)
	deltas  []int   // routeSwitched's position shift per translate
	generic bool    // route with add on every model (tests hold routeSwitched to it)

	// done is Watch's channel; stopped is set, for good, once a poll found it closed;
	// polls counts poll's calls.
	done    <-chan struct{}
	stopped bool
	polls   uint32
}

// pollEvery is how many routed transfers pass between two looks at a Router's done
// channel: a transfer costs tens of nanoseconds, so the router notices within about
// 100 µs, and the look (a non-blocking receive) costs nothing measurable.
const pollEvery = 1 << 12

// Watch makes r stop pricing once done is closed (nil: never): a Price call that finds
// it closed returns early with a meaningless estimate, and so does every later call,
// so a caller abandoning its work (a request past its deadline) is not held by a step
// of billions of transfers. Stopped reports it; the caller must discard what r priced
// since Watch. Release forgets the channel. What a router keeps across requests (its
// digit units and axis loads, the pool's memo) is computed in closed form, never by a
// routing that can stop, so a stopped router goes back to the pool with sound memos.
func (r *Router) Watch(done <-chan struct{}) { r.done = done }

// Stopped reports whether r stopped pricing because Watch's channel was closed: its
// estimates since are meaningless.
func (r *Router) Stopped() bool { return r.stopped }

// poll counts one unit of work and reports whether r is to stop; it looks at done every
// pollEvery calls.
func (r *Router) poll() bool {
	if r.polls++; r.polls&(pollEvery-1) != 0 || r.done == nil {
		return r.stopped
	}
	select {
	case <-r.done:
		r.stopped = true
	default:
	}
	return r.stopped
}

// ringLoads are one axis' link loads: per touched line, difference arrays of both
// directions, 2 x (n+1) floats from slot*2*(n+1).
type ringLoads struct {
	gen    []uint32 // per line
	slot   []int32  // per line
	lines  []int32  // touched lines, in slot order
	buf    []float64
	stride int
}

// devLoad is one device's switch port loads.
type devLoad struct {
	pos  int32
	port [numLinks][2]float64
}

// NewRouter builds a router for m on f.
func (f *Fabric) NewRouter(m *sharding.Mesh) *Router {
	r := &Router{f: f, m: m, rt: f.routes(m), stride: make([]int, len(m.Axes)), n: m.NumDevices()}
	s := 1
	for i := len(m.Axes) - 1; i >= 0; i-- {
		r.stride[i] = s
		s *= m.Axes[i].Size
	}
	return r
}

// allocate makes the per-line and per-device marks Price uses (O(devices) memory), on
// its first call: a router that only prices digit permutations never needs them.
func (r *Router) allocate() {
	m := r.m
	r.ring = make([]ringLoads, len(m.Axes))
	for i, a := range m.Axes {
		if r.rt[i].topo == switched || a.Size <= 1 {
			continue
		}
		lines := r.n / a.Size
		r.ring[i] = ringLoads{gen: make([]uint32, lines), slot: make([]int32, lines), stride: 2 * (a.Size + 1)}
	}
	r.devGen = make([]uint32, r.n)
	r.devSlot = make([]int32, r.n)
	r.cnt = [2][]int32{make([]int32, r.n), make([]int32, r.n)}
}

// line returns the difference arrays of axis i's line ln for this call.
func (r *Router) line(i, ln int) []float64 {
	rl := &r.ring[i]
	if rl.gen[ln] != r.gen {
		rl.gen[ln] = r.gen
		rl.slot[ln] = int32(len(rl.lines))
		rl.lines = append(rl.lines, int32(ln))
		n := len(rl.buf)
		if cap(rl.buf) >= n+rl.stride {
			rl.buf = rl.buf[:n+rl.stride]
			clear(rl.buf[n:])
		} else {
			rl.buf = append(rl.buf, make([]float64, rl.stride)...)
		}
	}
	k := int(rl.slot[ln]) * rl.stride
	return rl.buf[k : k+rl.stride]
}

// dev returns the loads of the device at position pos for this call.
func (r *Router) dev(pos int) *devLoad {
	r.touch(pos)
	if r.devSlot[pos] < 0 {
		r.devSlot[pos] = int32(len(r.devs))
		r.devs = append(r.devs, devLoad{pos: int32(pos)})
	}
	return &r.devs[r.devSlot[pos]]
}

// touch starts device pos's counts for this call.
func (r *Router) touch(pos int) {
	if r.devGen[pos] != r.gen {
		r.devGen[pos] = r.gen
		r.cnt[0][pos], r.cnt[1][pos] = 0, 0
		r.devSlot[pos] = -1
		r.touched = append(r.touched, int32(pos))
	}
}

// Price prices t exactly: every transfer is routed (torus axes dimension-ordered in
// mesh axis order, each on its ring the short way round, an antipodal transfer on an
// even ring split half each way; a switch axis through the sender's egress and the
// receiver's ingress port; on a GPU model, a transfer between nodes through the NICs of
// both nodes, gpus_per_node of them per node). The bandwidth term is the busiest
// resource's bytes over its bandwidth; the latency term is the largest base latency of
// the link classes used plus the longest route (hops x per-step latency on rings, one
// step per switch crossed), plus, for all_to_all_v, one per-step latency (the cheapest
// link's) for every further peer message the busiest device posts.
func (r *Router) Price(t *Traffic) TrafficEstimate {
	f := r.f
	offsets := t.Offsets
	if offsets == nil {
		offsets = make([][]int, len(r.m.Axes))
	}
	// Node loads need every copy: expand offsets when a GPU model has nodes.
	expand := f.gpusPerNode > 0
	r.reset()
	var out TrafficEstimate
	used := [numLinks]bool{}
	if expand && !r.generic && r.switchApplies() {
		r.routeSwitched(t, offsets, &out, &used)
	} else {
		r.routeAll(t, offsets, expand, &out, &used)
	}
	if !expand {
		// Each representative stands for every translate; bytes scale by the copies.
		mult := int64(1)
		for _, o := range offsets {
			if o != nil {
				mult *= int64(len(o))
			}
		}
		out.Bytes *= mult
	}
	// Bandwidth: the busiest resource.
	var w worstRes
	r.worstRing(&w, offsets, expand)
	r.worstPort(&w)
	for _, pos := range r.touched {
		out.MaxPeers = max(out.MaxPeers, int(r.cnt[0][pos]), int(r.cnt[1][pos]))
	}
	r.worstNode(&w)
	out.MaxLinkBytes = w.load
	out.BandwidthUS = w.time
	out.worst, out.router = w, r
	worstClass := w.class
	// Latency.
	base, alpha := 0.0, math.Inf(1)
	for c := range numLinks {
		if used[c] {
			base = max(base, f.links[c].base)
			alpha = min(alpha, f.links[c].lat)
		}
	}
	lat := out.LatencyUS // the longest route, set by add
	if t.Kind == AllToAllV && out.MaxPeers > 1 && !math.IsInf(alpha, 0) {
		lat += float64(out.MaxPeers-1) * alpha
	}
	if out.Bytes == 0 {
		return TrafficEstimate{Estimate: Estimate{Link: worstClass.String()}}
	}
	out.LatencyUS = base + lat
	out.TimeUS = f.combine(out.LatencyUS, out.BandwidthUS)
	out.Link = worstClass.String()
	return out
}

// reset starts a Price call: a new generation of marks, no touched lines or devices,
// and zero node loads.
func (r *Router) reset() {
	f := r.f
	if r.devGen == nil {
		r.allocate()
	}
	r.gen++
	if r.gen == 0 { // wrapped: forget every mark
		for i := range r.ring {
			clear(r.ring[i].gen)
		}
		clear(r.devGen)
		r.gen = 1
	}
	for i := range r.ring {
		r.ring[i].lines, r.ring[i].buf = r.ring[i].lines[:0], r.ring[i].buf[:0]
	}
	r.devs, r.touched = r.devs[:0], r.touched[:0]
	nodes := 1
	if f.gpusPerNode > 0 {
		nodes = (r.n + f.gpusPerNode - 1) / f.gpusPerNode
	}
	for d := range 2 {
		r.node[d] = zero(r.node[d], nodes)
	}
}

// routeAll routes every transfer of t; with expand, every translate of it by offsets.
func (r *Router) routeAll(t *Traffic, offsets [][]int, expand bool, out *TrafficEstimate, used *[numLinks]bool) {
	na := len(r.m.Axes)
	from2 := make([]int, na)
	to2 := make([]int, na)
	copies := 1
	if expand {
		for _, o := range offsets {
			if o != nil {
				copies *= len(o)
			}
		}
	}
	odo := make([]int, na)
	t.Each(func(from, to []int, bytes int64) bool {
		if bytes <= 0 {
			return true
		}
		w := float64(bytes)
		for c := range copies {
			if r.poll() {
				return false
			}
			if expand {
				decodeOdometer(c, offsets, odo)
				for i := range na {
					from2[i], to2[i] = from[i]+odo[i], to[i]+odo[i]
				}
			} else {
				copy(from2, from)
				copy(to2, to)
			}
			r.add(from2, to2, w, out, used)
		}
		return true
	})
}

// routeSwitched is routeAll on a GPU model whose axes all follow the nodes (add's
// routes there, without the walk over axes): a transfer between devices of one node
// crosses the sender's NVLink egress port and the receiver's ingress port, one between
// nodes both nodes' NICs, one switch crossing either way. Each translate adds a fixed
// number of positions to both ends, found once per call.
func (r *Router) routeSwitched(t *Traffic, offsets [][]int, out *TrafficEstimate, used *[numLinks]bool) {
	f := r.f
	g := f.gpusPerNode
	r.deltas = append(r.deltas[:0], 0)
	for i := len(offsets) - 1; i >= 0; i-- {
		if offsets[i] == nil {
			continue
		}
		n := len(r.deltas)
		for _, o := range offsets[i][1:] {
			for _, d := range r.deltas[:n] {
				r.deltas = append(r.deltas, d+o*r.stride[i])
			}
		}
		if o := offsets[i][0]; o != 0 {
			for k := range r.deltas[:n] {
				r.deltas[k] += o * r.stride[i]
			}
		}
	}
	nv, ib := f.links[linkNVLink].lat, f.links[linkIB].lat
	lat := 0.0
	t.Each(func(from, to []int, bytes int64) bool {
		if bytes <= 0 {
			return true
		}
		src0, dst0 := 0, 0
		for i := range from {
			src0 += from[i] * r.stride[i]
			dst0 += to[i] * r.stride[i]
		}
		if src0 == dst0 {
			return true
		}
		w := float64(bytes)
		for _, dl := range r.deltas {
			if r.poll() {
				return false
			}
			src, dst := src0+dl, dst0+dl
			out.Bytes += bytes
			r.touch(src)
			r.touch(dst)
			r.cnt[0][src]++
			r.cnt[1][dst]++
			if sn, dn := src/g, dst/g; sn != dn {
				used[linkIB] = true
				lat = max(lat, ib+f.p2pOverhead)
				r.node[0][sn] += w
				r.node[1][dn] += w
				continue
			}
			used[linkNVLink] = true
			lat = max(lat, nv)
			r.dev(src).port[linkNVLink][0] += w
			r.dev(dst).port[linkNVLink][1] += w
		}
		return true
	})
	if out.Bytes > 0 {
		out.MaxHops, out.LatencyUS = 1, lat
	}
}

// worstRing raises w to the busiest ring or line link; without expand, each link's load
// is summed over the translates by offsets.
func (r *Router) worstRing(w *worstRes, offsets [][]int, expand bool) {
	for i := range r.rt {
		rt := r.rt[i]
		rl := &r.ring[i]
		if len(rl.lines) == 0 {
			continue
		}
		n := rt.n
		r.scratch = zero(r.scratch, 2*n)
		load, tmp := r.scratch[:n], r.scratch[n:]
		for slot, ln := range rl.lines {
			for dir := range 2 {
				base := slot*rl.stride + dir*(n+1)
				acc := 0.0
				for x := range n {
					acc += rl.buf[base+x]
					load[x] = acc
				}
				if o := offsets[i]; o != nil && !expand {
					window(load, tmp, o, rt.topo != line)
				}
				for x, l := range load {
					if tm := l / rt.bw; tm > w.time {
						*w = worstRes{time: tm, load: l, class: rt.class, kind: resRing, axis: i, line: int(ln), x: x, dir: dir}
					}
				}
			}
		}
	}
}

// worstPort raises w to the busiest switch port of a touched device.
func (r *Router) worstPort(w *worstRes) {
	for k := range r.devs {
		dv := &r.devs[k]
		for c := range numLinks {
			for d := range 2 {
				if l := dv.port[c][d]; l > 0 {
					bw := r.f.links[c].bw
					if c == linkNVLink && r.f.gpusPerNode > 0 {
						bw = r.f.p2pNV
					}
					if tm := l / bw; tm > w.time {
						*w = worstRes{time: tm, load: l, class: c, kind: resPort, dir: d, x: int(dv.pos)}
					}
				}
			}
		}
	}
}

// worstNode raises w to the busiest node's NICs (in or out).
func (r *Router) worstNode(w *worstRes) {
	f := r.f
	for d := range 2 {
		for nd, l := range r.node[d] {
			nics := min(f.gpusPerNode, r.n-nd*f.gpusPerNode) // one NIC per GPU
			if tm := l / (f.p2pNIC * float64(nics)); tm > w.time {
				*w = worstRes{time: tm, load: l, class: linkIB, kind: resNode, dir: d, x: nd}
			}
		}
	}
}

// add routes one transfer of w bytes from -> to (full coordinates).
func (r *Router) add(from, to []int, w float64, out *TrafficEstimate, used *[numLinks]bool) {
	f := r.f
	src, dst := 0, 0
	for i := range from {
		src += from[i] * r.stride[i]
		dst += to[i] * r.stride[i]
	}
	if src == dst {
		return
	}
	out.Bytes += int64(w)
	r.touch(src)
	r.touch(dst)
	r.cnt[0][src]++
	r.cnt[1][dst]++
	interNode := f.gpusPerNode > 0 && src/f.gpusPerNode != dst/f.gpusPerNode
	var ports [numLinks]bool
	hops, lat := 0, 0.0
	// Dimension-ordered: axis i moves from from[i] to to[i] with axes < i already at
	// their destination and axes > i still at the source.
	at := src
	for i := range from {
		a, b := from[i], to[i]
		if a == b {
			continue
		}
		rt := &r.rt[i]
		class := rt.class
		if f.gpusPerNode > 0 && !rt.override {
			class = linkNVLink
			if interNode {
				class = linkIB
			}
		}
		used[class] = true
		// The current position has axes < i at to, axes >= i at from.
		cur := at
		at += (b - a) * r.stride[i]
		if rt.topo == switched || f.gpusPerNode > 0 && !rt.override {
			if !ports[class] {
				ports[class] = true
				lat += f.links[class].lat
				if class == linkIB && f.gpusPerNode > 0 {
					lat += f.p2pOverhead
				}
				hops++
			}
			continue
		}
		n := rt.n
		lineIdx := cur/(r.stride[i]*n)*r.stride[i] + cur%r.stride[i]
		h := routeRing(r.line(i, lineIdx), rt.topo, n, a, b, w)
		hops += h
		lat += float64(h) * rt.lat
	}
	r.addPorts(src, dst, w, &ports)
	out.MaxHops = max(out.MaxHops, hops)
	out.LatencyUS = max(out.LatencyUS, lat)
}

// addPorts adds w to the switch ports (or, between GPU nodes, the node NICs) the
// transfer src -> dst crosses.
func (r *Router) addPorts(src, dst int, w float64, ports *[numLinks]bool) {
	f := r.f
	for c := range numLinks {
		if ports[c] {
			if c == linkIB && f.gpusPerNode > 0 {
				r.node[0][src/f.gpusPerNode] += w
				r.node[1][dst/f.gpusPerNode] += w
				continue
			}
			r.dev(src).port[c][0] += w
			r.dev(dst).port[c][1] += w
		}
	}
}

// window replaces load by the sum of its translates by every offset (cyclically on a
// ring; on a line no translate of a loaded link leaves the line); tmp is scratch of the
// same length. Offsets that are a sum of arithmetic progressions (a translate per digit
// of the devices the representatives stand for) are windowed one progression at a
// time, each in one pass over the links: O(links x progressions), where translating by
// every offset is O(links x offsets). Loads are sums of whole and half bytes, so both
// orders of summing give the same floats.
func window(load, tmp []float64, offs []int, cyclic bool) {
	if shift, aps, ok := progressions(offs); ok && len(aps) > 0 {
		for _, ap := range aps {
			windowProgression(load, tmp, ap.step, ap.count, cyclic)
		}
		if shift != 0 {
			windowBy(load, tmp, []int{shift}, cyclic)
		}
		return
	}
	windowBy(load, tmp, offs, cyclic)
}

// windowBy is window by translating by every offset.
func windowBy(load, tmp []float64, offs []int, cyclic bool) {
	n := len(load)
	clear(tmp)
	for _, o := range offs {
		for x, l := range load {
			if l == 0 {
				continue
			}
			y := x + o
			if y >= n {
				if !cyclic {
					continue
				}
				y -= n
			}
			tmp[y] += l
		}
	}
	copy(load, tmp)
}

// progression is the offsets 0, step, ..., (count-1)·step.
type progression struct{ step, count int }

// progressions writes offs (each at least 0, at most the links) as shift plus a sum of
// progressions, each element of the sum once: ok false when offs is not such a sum (or
// when it is short enough that translating by each offset costs no more).
func progressions(offs []int) (shift int, aps []progression, ok bool) {
	if len(offs) < 8 {
		return 0, nil, false
	}
	set := slices.Clone(offs)
	slices.Sort(set)
	shift = set[0]
	for i := range set {
		set[i] -= shift
	}
	for len(set) > 1 {
		// The smallest nonzero offset steps the first progression; its run from 0 is the
		// progression, and the rest must be its sum with the offsets at multiples of the
		// run's length.
		step := set[1]
		if step == 0 {
			return 0, nil, false // a repeated offset
		}
		k := 1
		for k < len(set) && set[k] == k*step {
			k++
		}
		if len(set)%k != 0 {
			return 0, nil, false
		}
		rest := make([]int, 0, len(set)/k)
		for i := 0; i < len(set); i += k {
			rest = append(rest, set[i])
		}
		for i, b := range rest { // set is rest + {0, step, ..., (k-1)·step}, in order
			for j := range k {
				if set[i*k+j] != b+j*step {
					return 0, nil, false
				}
			}
		}
		aps = append(aps, progression{step, k})
		set = rest
	}
	return shift, aps, true
}

// windowProgression is window by the offsets 0, step, ..., (count-1)·step: along each
// chain of links step apart, a running sum of the last count loads.
func windowProgression(load, tmp []float64, step, count int, cyclic bool) {
	n := len(load)
	if !cyclic {
		for c := 0; c < step && c < n; c++ {
			acc := 0.0
			for i, y := 0, c; y < n; i, y = i+1, y+step {
				acc += load[y]
				if i >= count {
					acc -= load[y-count*step]
				}
				tmp[y] = acc
			}
		}
		copy(load, tmp)
		return
	}
	// A ring: the chains are the orbits of adding step mod n, each of length L; count
	// may go round an orbit several times.
	g := gcd(step%n, n)
	L := n / g
	q, r := count/L, count%L
	for c := 0; c < g; c++ {
		total := 0.0
		for i, y := 0, c; i < L; i, y = i+1, (y+step)%n {
			total += load[y]
		}
		// acc is the sum of the r loads ending at each position (r < L).
		acc := 0.0
		for i, y := 0, c; i < L+r; i, y = i+1, (y+step)%n {
			acc += load[y]
			if i >= r {
				acc -= load[((y-r*step)%n+n)%n]
			}
			if i >= r {
				tmp[y] = acc + float64(q)*total
			}
		}
	}
	copy(load, tmp)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func decodeOdometer(c int, offsets [][]int, dst []int) {
	for i := len(offsets) - 1; i >= 0; i-- {
		o := offsets[i]
		if o == nil {
			dst[i] = 0
			continue
		}
		dst[i] = o[c%len(o)]
		c /= len(o)
	}
}

func zero(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	b = b[:n]
	clear(b)
	return b
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Resource names the busiest resource for people: "ici link y+ from y=1 to y=2 at
// x=0", "nvlink egress of mesh position 5", "ib ingress of node 1 (8 NICs)". It is
// formatted on demand: pricing in a search never needs it.
func (e TrafficEstimate) Resource() string {
	if e.router == nil {
		return ""
	}
	return e.worst.describe(e.router)
}

type resKind uint8

const (
	resRing resKind = iota
	resPort
	resNode
)

// worstRes is the busiest resource found so far.
type worstRes struct {
	time, load float64
	class      linkClass
	kind       resKind
	axis, line int
	x, dir     int
}

// describe names the resource for people: "ici link y+ from y=1 (x=0)", "nvlink egress
// of position 5", "ib ingress of node 1".
func (w worstRes) describe(r *Router) string {
	if w.load == 0 {
		return ""
	}
	io := [2]string{"egress", "ingress"}[w.dir]
	switch {
	case w.kind == resPort && w.x < 0: // priced in closed form: a class of devices
		return fmt.Sprintf("%s %s of the busiest devices", w.class, io)
	case w.kind == resPort:
		return fmt.Sprintf("%s %s of mesh position %d", w.class, io, w.x)
	case w.kind == resNode && w.x < 0:
		return fmt.Sprintf("%s %s of the busiest nodes (%d NICs each)", w.class, io, r.f.gpusPerNode)
	case w.kind == resNode:
		return fmt.Sprintf("%s %s of node %d (%d NICs)", w.class, io, w.x, r.f.gpusPerNode)
	}
	m := r.m
	a := m.Axes[w.axis]
	from, to := w.x, (w.x+1)%a.Size
	sign := "+"
	if w.dir == 1 {
		from, to, sign = to, w.x, "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s link %s%s from %s=%d to %s=%d", w.class, a.Name, sign, a.Name, from, a.Name, to)
	if w.line < 0 {
		return b.String() // priced in closed form: the busiest line is a class of lines
	}
	// Rebuild the line's coordinates on the other axes.
	st := r.stride[w.axis]
	pos := w.line/st*st*a.Size + w.line%st
	coords := m.Coords(pos, nil)
	sep := " at "
	for i, c := range coords {
		if i == w.axis {
			continue
		}
		fmt.Fprintf(&b, "%s%s=%d", sep, m.Axes[i].Name, c)
		sep = ","
	}
	return b.String()
}

// PeakIngress is the most bytes per µs a device of m can receive, averaged over the
// devices, when every link into it is busy: two ring links per torus axis of size 3 or
// more (one on a ring or line of 2), one port per switched link class its axes ride
// (on a GPU model: its NVLink port and its share of its node's NICs, one per GPU). No
// point-to-point step the Router prices receives faster, so this bounds from below the
// time of any step that must deliver a given number of bytes (planner heuristics).
func (f *Fabric) PeakIngress(m *sharding.Mesh) float64 {
	total := 0.0
	var ports [numLinks]bool
	for _, rt := range f.routes(m) {
		if rt.n <= 1 {
			continue
		}
		switch {
		case f.gpusPerNode > 0 && !rt.override:
			ports[linkNVLink] = true
			if f.gpusPerNode < m.NumDevices() {
				ports[linkIB] = true
			}
		case rt.topo == switched:
			ports[rt.class] = true
		case rt.n >= 3 && rt.topo != ringUni:
			total += 2 * rt.bw
		default:
			total += rt.bw
		}
	}
	for c := range numLinks {
		if ports[c] {
			total += f.links[c].bw
		}
	}
	return total
}

// HalfCut is the bandwidth (bytes per µs) into one half of mesh axis i when the axis is
// cut into positions [0, n/2) and [n/2, n): on a ring two links per line cross into
// each half (one on a one-way ring), on a line one; ok is false for axes that are not
// routed as rings or lines (switches, GPU axes), whose cuts the injection bound covers.
func (f *Fabric) HalfCut(m *sharding.Mesh, i int) (bw float64, ok bool) {
	rt := f.routes(m)[i]
	if rt.n < 2 || rt.topo == switched || f.gpusPerNode > 0 && !rt.override {
		return 0, false
	}
	links := 1.0
	if rt.topo == ringBidi || rt.topo == ringUni {
		links = 2
		if rt.topo == ringUni {
			links = 1
		}
	}
	lines := float64(m.NumDevices() / rt.n)
	return links * lines * rt.bw, true
}

// AxisHop is how one mesh axis counts in a latency bound: LatencyUS per physical hop
// of a transfer along it (0: the axis is not routed as a ring or a line, and counts
// nothing), its Size, and how far apart two coordinates are on it (Distance).
type AxisHop struct {
	LatencyUS float64
	Size      int
	Wrapped   bool // a ring: counted the short way round
}

// Distance is the fewest hops between coordinates from and to along the axis: on a
// line their difference, on a ring the short way round (a one-way ring counts as a
// ring: its forward route is never shorter, and the all-gather formula's (n-1) x stride
// steps on a strided sub-axis need not cover the forward route).
func (h AxisHop) Distance(from, to int) int {
	d := to - from
	if h.Wrapped {
		d = ((d % h.Size) + h.Size) % h.Size
		return min(d, h.Size-d)
	}
	return max(d, -d)
}

// AxisHops describes every mesh axis of m for a latency bound. The contract the planner's
// heuristic relies on (TestLatencyCoversHops holds every kind to it): whenever a
// collective Estimate prices (all_gather, all_to_all, reduce_scatter, all_reduce) or a
// Traffic Router.Price prices moves data from device u to device v, its LatencyUS is
// at least the sum over axes of LatencyUS x Distance(u_i, v_i). A chain of steps that
// carries a byte from u to v therefore pays at least that sum in latency (the distance
// obeys the triangle inequality on every axis). Switched axes and the axes of a GPU
// model (one latency per switch crossed, not per hop) have LatencyUS 0.
func (f *Fabric) AxisHops(m *sharding.Mesh) []AxisHop {
	rts := f.routes(m)
	out := make([]AxisHop, len(rts))
	for i, rt := range rts {
		out[i] = AxisHop{Size: max(rt.n, 1)}
		if rt.n < 2 || rt.topo == switched || f.gpusPerNode > 0 && !rt.override {
			continue
		}
		out[i].LatencyUS = rt.lat
		out[i].Wrapped = rt.topo == ringBidi || rt.topo == ringUni
	}
	return out
}

// PeakDeviceIngress is the most bytes per µs one device can receive when it alone is
// receiving: PeakIngress, except that on a GPU model a device may borrow every NIC of
// its node.
func (f *Fabric) PeakDeviceIngress(m *sharding.Mesh) float64 {
	p := f.PeakIngress(m)
	if f.gpusPerNode > 0 && f.gpusPerNode < m.NumDevices() {
		p += float64(f.gpusPerNode-1) * f.links[linkIB].bw
	}
	return p
}

// NodeIngress describes m's nodes on a GPU model whose mesh spans more than one node:
// gpus_per_node consecutive mesh positions per node, each GPU's NIC bringing nicBW bytes
// per µs into its node (the only way in). ok is false otherwise (and for meshes whose
// axes all have axis_links, whose routes do not follow nodes).
func (f *Fabric) NodeIngress(m *sharding.Mesh) (gpusPerNode int, nicBW float64, ok bool) {
	if f.gpusPerNode == 0 || f.gpusPerNode >= m.NumDevices() || len(f.axisLinks) > 0 {
		return 0, 0, false
	}
	return f.gpusPerNode, f.links[linkIB].bw, true
}

// MinLatency is the least latency any step that moves data pays on m: the least
// per-collective base plus the least per-step latency of the link classes m's axes ride.
func (f *Fabric) MinLatency(m *sharding.Mesh) float64 {
	base, step := f.LatencyFloors(m)
	return base + step
}

// LatencyFloors are the least per-collective base latency and the least per-step
// latency of the link classes m's axes ride (0, 0 when none moves data). Router.Price
// charges at least the base plus the longest route, and on an all_to_all_v one
// per-step latency of the links it uses for every further peer message of the busiest
// device.
func (f *Fabric) LatencyFloors(m *sharding.Mesh) (base, step float64) {
	lat, b := math.Inf(1), math.Inf(1)
	note := func(c linkClass) {
		lat = min(lat, f.links[c].lat)
		b = min(b, f.links[c].base)
	}
	for _, rt := range f.routes(m) {
		if rt.n <= 1 {
			continue
		}
		note(rt.class)
		if f.gpusPerNode > 0 && !rt.override && f.gpusPerNode < m.NumDevices() {
			note(linkIB)
		}
	}
	if math.IsInf(lat, 0) {
		return 0, 0
	}
	return b, lat
}

// Combine adds or takes the larger of a latency and a bandwidth term, per the model's
// mode.
func (f *Fabric) Combine(lat, bw float64) float64 { return f.combine(lat, bw) }

// Additive reports whether the model adds the latency and bandwidth terms (mode
// "additive") rather than taking the larger.
func (f *Fabric) Additive() bool { return !f.maxMode }
