package cost

import (
	"math"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/sharding"
)

// linkClass is one of the four link classes; it indexes Fabric.links.
type linkClass uint8

const (
	linkICI linkClass = iota
	linkNVLink
	linkIB
	linkDCN
	numLinks
)

func (c linkClass) String() string {
	switch c {
	case linkICI:
		return "ici"
	case linkNVLink:
		return "nvlink"
	case linkIB:
		return "ib"
	case linkDCN:
		return "dcn"
	}
	return ""
}

func parseLinkClass(s string) (linkClass, bool) {
	for c := range numLinks {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
}

// topology is a link's shape. torus is resolved per axis to ringBidi or line.
type topology uint8

const (
	torus topology = iota
	ringBidi
	ringUni
	line
	switched
)

var topologyNames = map[string]topology{
	"torus": torus, "ring_bidi": ringBidi, "ring_uni": ringUni, "line": line, "switch": switched,
}

type wrapRule uint8

const (
	wrapAlways wrapRule = iota
	wrapNever
	wrapSize16
	wrapCube
)

var wrapNames = map[string]wrapRule{
	"always": wrapAlways, "never": wrapNever, "size16": wrapSize16, "cube": wrapCube,
}

// Limits on figures, so that no time can overflow to Inf or NaN.
const (
	minBandwidthGBps = 1e-6
	maxBandwidthGBps = 1e6
	maxLatencyUS     = 1e6
	// minEfficiency keeps the slowest bandwidth (minBandwidthGBps × minEfficiency) far
	// enough from zero that the largest tensor's time is finite.
	minEfficiency = 1e-6
)

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)
	axisRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// link is one link class's figures in the units Estimate uses.
type link struct {
	defined bool
	bw      float64 // bytes per µs per link per direction, efficiency applied
	lat     float64 // µs per step
	base    float64 // µs per collective
	topo    topology
	wrap    wrapRule
}

// Fabric is the topology-aware Model: each group axis rides a link class (ICI torus,
// NVLink/NVSwitch, InfiniBand, DCN) and is priced with the formulas of COSTMODEL.md B.1-B.4.
// A Fabric is immutable and safe for concurrent use.
type Fabric struct {
	info        ProfileInfo
	links       [numLinks]link
	axisLinks   map[string]linkClass
	gpusPerNode int
	maxMode     bool
	overlapped  bool
	// coll prices GPU collectives as NCCL runs them (nil: B.1-B.4's formulas).
	coll *ncclFigures
	// p2pNIC is a NIC's bytes per µs for one point-to-point pair between nodes, and
	// p2pOverhead the µs each such message adds (the transport's figures).
	p2pNIC, p2pOverhead float64
	// p2pNV is a GPU's NVLink bytes per µs for point-to-point moves inside a node.
	p2pNV float64

	keyOnce sync.Once // poolKey's fabric part, computed once
	key     string
	fpOnce  sync.Once // Fingerprint, computed once
	fp      string
	// lastKey is the last mesh poolKey named, with its key: one request asks for the
	// key of its mesh several times (a router per goroutine, the heuristic's memos).
	lastKey    atomic.Pointer[meshKey]
	lastRoutes atomic.Pointer[meshRoutes] // routes' last mesh
}

var _ Model = (*Fabric)(nil)

// New validates p and builds its model. Empty Mode, Hierarchy and torus Wrap default to
// "additive", "sequential" and "always"; a zero Efficiency means 1. Errors are
// *fielderr.FieldError values whose Field is the JSON path inside p
// ("links.ici.bandwidth_gbps"). New does not keep p's maps.
func New(p ProfileInfo) (*Fabric, error) {
	f, err := build(p.clone(), "")
	if err != nil {
		return nil, err
	}
	return f, nil
}

// build validates p (owned by build) and names errors under field.
func build(p ProfileInfo, field string) (*Fabric, *fielderr.FieldError) {
	f := &Fabric{axisLinks: map[string]linkClass{}}
	if err := f.setOptions(&p, field); err != nil {
		return nil, err
	}
	lf := join(field, "links")
	for _, name := range sortedKeys(p.Links) {
		if err := f.addLink(p, name, lf); err != nil {
			return nil, err
		}
	}
	if err := f.checkNeededLinks(lf); err != nil {
		return nil, err
	}
	if err := f.setAxisLinks(p, join(field, "axis_links")); err != nil {
		return nil, err
	}
	f.p2pNIC, f.p2pNV = f.links[linkIB].bw, f.links[linkNVLink].bw
	if err := f.setCollectives(&p, join(field, "collectives")); err != nil {
		return nil, err
	}
	f.info = p
	return f, nil
}

// setOptions checks p's name, mode, hierarchy, efficiency and GPUs per node, sets them on
// f, and fills in p's defaults.
func (f *Fabric) setOptions(p *ProfileInfo, field string) *fielderr.FieldError {
	if !nameRE.MatchString(p.Name) {
		return fielderr.New(join(field, "name"), "name %q must be 1-64 letters, digits or ._+- starting with a letter or digit", p.Name)
	}
	switch p.Mode {
	case "", "additive":
		p.Mode = "additive"
	case "max":
		f.maxMode = true
	default:
		return fielderr.New(join(field, "mode"), "unknown mode %q; use \"additive\" (latency + bandwidth) or \"max\" (max of the two)", p.Mode)
	}
	switch p.Hierarchy {
	case "", "sequential":
		p.Hierarchy = "sequential"
	case "overlapped":
		f.overlapped = true
	default:
		return fielderr.New(join(field, "hierarchy"), "unknown hierarchy %q; use \"sequential\" or \"overlapped\"", p.Hierarchy)
	}
	if p.Efficiency == 0 {
		p.Efficiency = 1
	}
	if !(p.Efficiency >= minEfficiency && p.Efficiency <= 1) {
		return fielderr.New(join(field, "efficiency"), "is %v; give the achievable fraction of peak bandwidth in [%g, 1], e.g. 0.824", p.Efficiency, minEfficiency)
	}
	if p.GPUsPerNode < 0 || p.GPUsPerNode > sharding.MaxMeshDevices {
		return fielderr.New(join(field, "gpus_per_node"), "is %d; give 0 (every axis on ici) or the number of GPUs per NVLink domain, e.g. 8", p.GPUsPerNode)
	}
	f.gpusPerNode = p.GPUsPerNode
	return nil
}

// addLink checks p's link of class name (at field lf.name), fills in its default wrap
// rule in p.Links and sets it on f, its bandwidth scaled by p's efficiency.
func (f *Fabric) addLink(p ProfileInfo, name, lf string) *fielderr.FieldError {
	l := p.Links[name]
	c, ok := parseLinkClass(name)
	if !ok {
		return fielderr.New(join(lf, name), "unknown link class %q; use ici, nvlink, ib or dcn", name)
	}
	f2 := join(lf, name)
	if !(l.BandwidthGBps >= minBandwidthGBps && l.BandwidthGBps <= maxBandwidthGBps) {
		return fielderr.New(join(f2, "bandwidth_gbps"), "is %v; give the bandwidth per link per direction in GB/s, between %g and %g, e.g. 90", l.BandwidthGBps, minBandwidthGBps, maxBandwidthGBps)
	}
	if !(l.LatencyUS >= 0 && l.LatencyUS <= maxLatencyUS) {
		return fielderr.New(join(f2, "latency_us"), "is %v; give the latency per step in µs, between 0 and %g, e.g. 1", l.LatencyUS, maxLatencyUS)
	}
	if !(l.BaseLatencyUS >= 0 && l.BaseLatencyUS <= maxLatencyUS) {
		return fielderr.New(join(f2, "base_latency_us"), "is %v; give the latency per collective in µs, between 0 and %g, e.g. 6.6", l.BaseLatencyUS, maxLatencyUS)
	}
	topo, ok := topologyNames[l.Topology]
	if !ok {
		return fielderr.New(join(f2, "topology"), "unknown topology %q; use torus, ring_bidi, ring_uni, line or switch", l.Topology)
	}
	wrap := wrapAlways
	switch {
	case topo == torus && l.Wrap == "":
		l.Wrap = "always"
	case topo == torus:
		if wrap, ok = wrapNames[l.Wrap]; !ok {
			return fielderr.New(join(f2, "wrap"), "unknown wrap rule %q; use always, never, size16 or cube", l.Wrap)
		}
	case l.Wrap != "":
		return fielderr.New(join(f2, "wrap"), "applies only to topology \"torus\"; remove it or set topology to torus")
	}
	if l.LinksPerChip < 0 || l.LinksPerChip > 1024 {
		return fielderr.New(join(f2, "links_per_chip"), "is %d; give the number of links per chip (informational), e.g. 6", l.LinksPerChip)
	}
	p.Links[name] = l
	f.links[c] = link{
		defined: true,
		bw:      l.BandwidthGBps * 1e3 * p.Efficiency, // GB/s = 1e3 bytes per µs
		lat:     l.LatencyUS,
		base:    l.BaseLatencyUS,
		topo:    topo,
		wrap:    wrap,
	}
	return nil
}

// checkNeededLinks checks that f defines the links its axes ride by default: ici, or
// nvlink and ib when there are GPUs per node. lf is the links' field.
func (f *Fabric) checkNeededLinks(lf string) *fielderr.FieldError {
	need := []linkClass{linkICI}
	why := "with gpus_per_node 0 every axis rides ici"
	if f.gpusPerNode > 0 {
		need = []linkClass{linkNVLink, linkIB}
		why = "with gpus_per_node > 0 axes inside a node ride nvlink and the others ib"
	}
	for _, c := range need {
		if !f.links[c].defined {
			return fielderr.New(lf, "needs link %q (%s); add links.%s with bandwidth_gbps and topology", c, why, c)
		}
	}
	return nil
}

// setAxisLinks checks p's axis_links (at field af), each an axis name and a link f
// defines, and sets them on f.
func (f *Fabric) setAxisLinks(p ProfileInfo, af string) *fielderr.FieldError {
	for _, axis := range sortedKeys(p.AxisLinks) {
		name := p.AxisLinks[axis]
		if !axisRE.MatchString(axis) {
			return fielderr.New(join(af, axis), "%q is not a mesh axis name ([A-Za-z_][A-Za-z0-9_]*)", axis)
		}
		c, ok := parseLinkClass(name)
		if !ok {
			return fielderr.New(join(af, axis), "unknown link class %q; use ici, nvlink, ib or dcn", name)
		}
		if !f.links[c].defined {
			return fielderr.New(join(af, axis), "link %q is not defined by this model (links: %s); add links.%s or choose a defined link", name, joinKeys(p.Links), name)
		}
		f.axisLinks[axis] = c
	}
	return nil
}

// Name is the model's name: a profile name or the name of a custom model.
func (f *Fabric) Name() string { return f.info.Name }

// Info is the model's description; the result is the caller's.
func (f *Fabric) Info() ProfileInfo { return f.info.clone() }

// part is one group axis as priced: its link class, its resolved shape, its size and
// its effective per-direction bandwidth in bytes per µs.
type part struct {
	class linkClass
	topo  topology // ringBidi, ringUni, line or switched
	n     int
	bw    float64
	hop   int // physical hops per step: the sub-axis stride on a ring, 1 on a switch
}

// level is the run of parts on one link class.
type level struct {
	class  linkClass
	n      int     // devices of the group along this level
	thr    float64 // per-device injection bandwidth (bytes per µs)
	lo, hi int     // parts[lo:hi]
}

// maxParts sizes the stack buffers of Estimate; larger groups allocate.
const maxParts = 16

// parts resolves the group axes of c. Sub-axes are priced on their physical ring: a
// strided sub-axis (Minor > 1) shares each link with Minor interleaved groups, so its
// bandwidth is divided by Minor, and only a sub-axis that reaches the axis' major end
// (Pre == 1) keeps the wraparound. Size-1 axes are dropped.
func (f *Fabric) parts(c *Collective, dst []part) []part {
	for _, r := range c.Axes {
		if r.Size <= 1 {
			continue
		}
		pre := max(r.Pre, 1)
		next := mulSat(pre, r.Size)
		of, minor := r.Of, 1
		if of >= next {
			minor = of / next
		} else {
			of = next
		}
		class := f.classOf(c.Mesh, r.Name, minor, r.Size)
		if inner := f.nodeSplit(c.Mesh, r.Name, minor, r.Size, class); inner > 1 {
			// The sub-axis spans whole runs of a node's GPUs: inside each node they
			// talk over NVLink, and the node's NICs carry what crosses nodes together.
			dst = append(dst, part{class: linkNVLink, topo: switched, n: inner, bw: f.links[linkNVLink].bw, hop: 1},
				part{class: linkIB, topo: switched, n: r.Size / inner, bw: f.links[linkIB].bw, hop: 1})
			continue
		}
		l := &f.links[class]
		p := part{class: class, topo: l.topo, n: r.Size, bw: l.bw, hop: 1}
		if p.topo == torus {
			p.topo = line
			if f.wraps(c.Mesh, class, l.wrap, of) {
				p.topo = ringBidi
			}
		}
		if p.topo != switched {
			p.bw /= float64(minor)
			p.hop = minor
			if pre > 1 && p.topo == ringBidi {
				p.topo = line
			}
		}
		dst = append(dst, p)
	}
	return dst
}

// classOf is the link class of (a sub-axis of) mesh axis name: axis_links first; then,
// on a GPU model, nvlink when the mesh fits in one node or the group's span in
// row-major positions (stride * size) divides gpus_per_node, ib otherwise; else ici.
func (f *Fabric) classOf(m *sharding.Mesh, name string, minor, size int) linkClass {
	if c, ok := f.axisLinks[name]; ok {
		return c
	}
	if f.gpusPerNode == 0 {
		return linkICI
	}
	stride := 1
	if m != nil {
		stride = max(m.Stride(name), 1)
		if m.NumDevices() <= f.gpusPerNode {
			return linkNVLink // the whole mesh is one node
		}
	}
	span := mulSat(mulSat(stride, minor), size)
	if span <= f.gpusPerNode && f.gpusPerNode%span == 0 {
		return linkNVLink
	}
	return linkIB
}

// nodeSplit is, for a (sub-)axis that classOf puts on ib on a GPU model whose nvlink
// and ib links are switches, how many of its devices share each node: its step in
// row-major positions (stride × minor) divides gpus_per_node and its size is a multiple
// of the devices it has in a node. 0 when it does not split so (or has one per node).
func (f *Fabric) nodeSplit(m *sharding.Mesh, name string, minor, size int, class linkClass) int {
	if class != linkIB || f.gpusPerNode == 0 || f.links[linkNVLink].topo != switched || f.links[linkIB].topo != switched {
		return 0
	}
	if _, ok := f.axisLinks[name]; ok {
		return 0
	}
	stride := 1
	if m != nil {
		stride = max(m.Stride(name), 1)
	}
	step := mulSat(stride, minor)
	if step >= f.gpusPerNode || f.gpusPerNode%step != 0 {
		return 0
	}
	inner := f.gpusPerNode / step
	if size <= inner || size%inner != 0 {
		return 0
	}
	return inner
}

// wraps applies the wrap rule to an axis of full size of on link class.
func (f *Fabric) wraps(m *sharding.Mesh, class linkClass, rule wrapRule, of int) bool {
	switch rule {
	case wrapAlways:
		return true
	case wrapSize16:
		return of == 16
	case wrapCube:
		if m == nil {
			return of%4 == 0
		}
		prod := 1
		for _, a := range m.Axes {
			if a.Size <= 1 || f.classOf(m, a.Name, 1, a.Size) != class {
				continue
			}
			if a.Size%4 != 0 {
				return false
			}
			prod = (prod * a.Size) % 64
		}
		return prod == 0
	}
	return false
}

// levels groups parts by link class (stably) and returns the levels in class order,
// which is also their physical nesting: ici and nvlink inside, ib and dcn outside.
func levels(parts []part, dst *[numLinks]level) []level {
	for i := 1; i < len(parts); i++ { // insertion sort by class
		for j := i; j > 0 && parts[j].class < parts[j-1].class; j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
	lv := dst[:0]
	for i, p := range parts {
		if len(lv) == 0 || lv[len(lv)-1].class != p.class {
			lv = append(lv, level{class: p.class, n: 1, lo: i})
		}
		l := &lv[len(lv)-1]
		l.n = mulSat(l.n, p.n)
		l.hi = i + 1
		if p.topo == switched {
			l.thr = p.bw
		} else {
			l.thr += float64(wrapFactor(p.topo)) * p.bw
		}
	}
	return lv
}

// byThroughput copies lv into dst, fastest level first (ties keep class order).
func byThroughput(lv []level, dst *[numLinks]level) []level {
	out := append(dst[:0], lv...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].thr > out[j-1].thr; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// wrapFactor is c_i of COSTMODEL.md B.2: links a device drives per direction pair.
func wrapFactor(t topology) int {
	if t == ringBidi {
		return 2
	}
	return 1
}

// Estimate prices c; see the package documentation for the formulas. It does not
// allocate for groups of up to 16 axes and never panics: unknown kinds are priced as an
// all_reduce, negative bytes as zero.
func (f *Fabric) Estimate(c Collective) Estimate {
	var pbuf [maxParts]part
	var lbuf, sbuf [numLinks]level
	parts := f.parts(&c, pbuf[:0])
	nested := levels(parts, &lbuf)
	if len(nested) == 0 {
		return Estimate{}
	}
	lv := byThroughput(nested, &sbuf)
	e := Estimate{Link: lv[len(lv)-1].class.String()}
	if c.Bytes <= 0 {
		return e
	}
	n := 1
	for _, l := range lv {
		n = mulSat(n, l.n)
	}
	v := float64(c.Bytes)
	if f.coll != nil {
		if ne, ok := f.ncclEstimate(c.Kind, nested, v); ok {
			return ne
		}
	}
	var lat, bw, base, worst float64
	bound := lv[len(lv)-1].class
	note := func(l level, t float64) {
		if t > worst {
			worst, bound = t, l.class
		}
		base = max(base, f.links[l.class].base)
	}
	switch c.Kind {
	case AllToAll:
		// Direct exchange: level j carries each device's bytes for the peers whose
		// outermost differing level is j, priced as an A2A of that level.
		p := 1.0
		for _, l := range nested {
			vj := v * p / float64(n) * float64(l.n) / float64(n) * float64(l.n)
			h, t := a2aLevel(parts[l.lo:l.hi], l, vj)
			lat += h * f.links[l.class].lat
			bw = max(bw, t)
			note(l, t)
			p *= float64(l.n)
		}
	case CollectivePermute, AllToAllV:
		// The pattern is unknown: the slowest level the group spans bounds it.
		d := max(c.Hops, 1)
		for _, l := range lv {
			h, t := p2pLevel(parts[l.lo:l.hi], l, v, d, c.Kind == AllToAllV)
			lk := &f.links[l.class]
			if total := f.combine(lk.base+h*lk.lat, t); total > worst || worst == 0 {
				worst, bound, lat, bw, base = total, l.class, h*lk.lat, t, lk.base
			}
		}
	default: // AllGather, ReduceScatter, AllReduce (and unknown kinds, as AllReduce)
		// Hierarchical: gather the slowest level first on the smallest array, the
		// fastest last on all of V; reduce-scatter mirrors it; all-reduce is both.
		scale := 2.0
		if c.Kind == AllGather || c.Kind == ReduceScatter {
			scale = 1
		}
		vj := v
		for _, l := range lv {
			h, t := agLevel(parts[l.lo:l.hi], l, vj)
			h, t = scale*h, scale*t
			lat += h * f.links[l.class].lat
			if f.overlapped {
				bw = max(bw, t)
			} else {
				bw += t
			}
			note(l, t)
			vj /= float64(l.n)
		}
	}
	e.LatencyUS = base + lat
	e.BandwidthUS = bw
	e.TimeUS = f.combine(e.LatencyUS, bw)
	e.Link = bound.String()
	return e
}

func (f *Fabric) combine(lat, bw float64) float64 {
	if f.maxMode {
		return math.Max(lat, bw)
	}
	return lat + bw
}

// agLevel is an all-gather of v bytes over one level: steps and bandwidth time (µs).
func agLevel(ps []part, l level, v float64) (steps, t float64) {
	n := float64(l.n)
	t = (n - 1) / n * v / l.thr
	if ps[0].topo == switched {
		return n - 1, t
	}
	for _, p := range ps {
		steps += float64(ringSteps(p))
	}
	return steps, t
}

// ringSteps is H of B.1 for an all-gather on one ring axis, in physical hops: a strided
// sub-axis' every step crosses its stride in links.
func ringSteps(p part) int {
	if p.topo == ringBidi {
		return p.n / 2 * p.hop
	}
	return (p.n - 1) * p.hop
}

// a2a1D is the bandwidth time of an all-to-all of v bytes over one axis (B.1).
func a2a1D(p part, v float64) float64 {
	n := float64(p.n)
	half := float64(p.n/2) * float64((p.n+1)/2) // ⌊N/2⌋⌈N/2⌉
	switch p.topo {
	case ringBidi:
		return half / (2 * n * n) * v / p.bw
	case line:
		return half / (n * n) * v / p.bw
	case ringUni:
		return (n - 1) / (2 * n) * v / p.bw
	}
	return (n - 1) / (n * n) * v / p.bw
}

// a2aLevel is an all-to-all of v bytes (B.0 convention) over one level. On a torus the
// axes run concurrently, dimension-ordered: axis i carries a 1D all-to-all of
// v*N_i/N bytes (B.2's bisection form for wrapped axes).
func a2aLevel(ps []part, l level, v float64) (steps, t float64) {
	if ps[0].topo == switched {
		return float64(l.n - 1), a2a1D(part{topo: switched, n: l.n, bw: l.thr}, v)
	}
	for _, p := range ps {
		steps += float64(ringSteps(p))
		t = max(t, a2a1D(p, v*float64(p.n)/float64(l.n)))
	}
	return steps, t
}

// p2pLevel prices a collective-permute (or all_to_all_v) in which every device sends
// and receives at most v bytes over at most d ring steps. On a ring the links of a
// shift by d carry d transfers each; a wrapped single axis routes the short way.
func p2pLevel(ps []part, l level, v float64, d int, many bool) (steps, t float64) {
	if ps[0].topo == switched {
		steps = 1
		if many {
			steps = float64(l.n - 1)
		}
		return steps, v / l.thr
	}
	steps = float64(distance(ps, d))
	if len(ps) == 1 {
		return steps, steps * v / ps[0].bw
	}
	for _, p := range ps {
		t = max(t, float64(min(d, diameter(p)))*v/p.bw)
	}
	return steps, t
}

// distance is how many steps a transfer of ring distance d travels on a torus level:
// the short way round on a single wrapped axis, at most the level's diameter otherwise.
func distance(ps []part, d int) int {
	if len(ps) == 1 && ps[0].topo == ringBidi {
		dd := d % ps[0].n
		return max(min(dd, ps[0].n-dd), 1) * ps[0].hop
	}
	if len(ps) == 1 && ps[0].topo != switched {
		return min(max(d, 1), ps[0].n-1) * ps[0].hop
	}
	diam := 0
	for _, p := range ps {
		diam += diameter(p)
	}
	return min(d, diam)
}

// diameter is the largest distance in physical hops along one axis.
func diameter(p part) int {
	switch p.topo {
	case ringBidi:
		return p.n / 2 * p.hop
	case switched:
		return 1
	}
	return (p.n - 1) * p.hop
}

// mulSat multiplies positive ints, saturating at math.MaxInt32 (far above any mesh), so
// that malformed axis sizes cannot overflow into a division by zero.
func mulSat(a, b int) int {
	const limit = math.MaxInt32
	if a <= 0 || b <= 0 {
		return 1
	}
	if a > limit/b {
		return limit
	}
	return a * b
}
