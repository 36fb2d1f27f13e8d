package cost

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/nccltests"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Measurement is one timed collective, as nccl-tests prints it: the collective
// (all_gather, reduce_scatter, all_reduce, all_to_all, or collective_permute for
// sendrecv_perf's ring of sends), the ranks and nodes it ran on, nccl-tests' size column
// (Bytes: the output of an all_gather, the input of a reduce_scatter, the array of an
// all_reduce, one rank's send buffer of an all_to_all or a sendrecv) and its time.
type Measurement struct {
	// Source names where the point comes from (a file and line), for reports and the
	// fitted figures' sources.
	Source string
	Kind   Kind
	Ranks  int
	Nodes  int
	Bytes  int64
	TimeUS float64
	// NICGBps, when > 0, is the measured cluster's NIC rate per GPU (GB/s) where it
	// differs from the profile's ib figure.
	NICGBps float64
}

// PointError is a measurement with the model's price of it.
type PointError struct {
	Measurement
	PredictedUS float64 `json:"predicted_us"`
	// Error is predicted/measured - 1: positive when the model is pessimistic.
	Error float64 `json:"error"`
}

// Scope is where m ran: one node, several nodes with several GPUs each, or one GPU
// in each of several nodes.
func (m Measurement) Scope() Scope {
	switch {
	case m.Nodes <= 1:
		return ScopeNode
	case m.Ranks <= m.Nodes:
		return ScopeGPUPerNode
	}
	return ScopeNodes
}

// MeasuredModel is p adjusted to the machine m ran on: a group of several nodes gets
// m's GPUs per node (ranks / nodes) and, when given, m's NIC rate.
func MeasuredModel(p ProfileInfo, m Measurement) ProfileInfo {
	p = p.clone()
	if m.Nodes > 1 && m.Ranks%m.Nodes == 0 {
		p.GPUsPerNode = m.Ranks / m.Nodes
	}
	if m.NICGBps > 0 {
		if l, ok := p.Links["ib"]; ok {
			l.BandwidthGBps = m.NICGBps
			p.Links["ib"] = l
		}
	}
	return p
}

// PriceMeasurement prices m on f (a model of the machine m ran on, MeasuredModel):
// the collective over a one-axis mesh of m.Ranks devices; a sendrecv as every rank
// sending m.Bytes to the next, routed point to point.
func PriceMeasurement(f *Fabric, m Measurement) (float64, error) {
	if m.Ranks < 2 || m.Bytes <= 0 {
		return 0, fmt.Errorf("%s: needs 2 or more ranks and a positive size", m.Source)
	}
	mesh, err := sharding.NewMesh("X", []sharding.Axis{{Name: "X", Size: m.Ranks}}, nil)
	if err != nil {
		return 0, err
	}
	axes := []sharding.AxisRef{{Name: "X", Size: m.Ranks, Of: m.Ranks, Pre: 1}}
	switch m.Kind {
	case AllGather, ReduceScatter, AllReduce:
		return f.Estimate(Collective{Kind: m.Kind, Bytes: m.Bytes, Mesh: mesh, Axes: axes}).TimeUS, nil
	case AllToAll:
		return f.Estimate(Collective{Kind: m.Kind, Bytes: m.Bytes * int64(m.Ranks), Mesh: mesh, Axes: axes}).TimeUS, nil
	case CollectivePermute:
		r := f.NewRouter(mesh)
		n := m.Ranks
		e := r.Price(&Traffic{Kind: CollectivePermute, Mesh: mesh, Offsets: [][]int{nil},
			Each: func(yield func(from, to []int, bytes int64) bool) {
				for i := range n {
					if !yield([]int{i}, []int{(i + 1) % n}, m.Bytes) {
						return
					}
				}
			}})
		return e.TimeUS, nil
	}
	return 0, fmt.Errorf("%s: cannot price %q; use all_gather, reduce_scatter, all_reduce, all_to_all or collective_permute (sendrecv)", m.Source, m.Kind)
}

// Errors prices every measurement on p (adjusted per MeasuredModel).
func Errors(p ProfileInfo, ms []Measurement) ([]PointError, error) {
	ev, err := newEvaluator(ms)
	if err != nil {
		return nil, err
	}
	return ev.errors(p)
}

// fitParam is one figure Fit may move: where it lives in a profile, its range and
// whether it is searched on a log scale.
type fitParam struct {
	algo   string // "" for p2p figures
	name   string
	lo, hi float64
	log    bool
}

func (fp fitParam) get(p *ProfileInfo) float64 {
	c := p.Collectives
	if fp.algo == "" {
		switch fp.name {
		case "net_efficiency":
			return c.P2P.NetEfficiency
		case "nvlink_efficiency":
			if c.P2P.NVLinkEfficiency == 0 {
				return 1
			}
			return c.P2P.NVLinkEfficiency
		}
		return c.P2P.MessageOverheadUS
	}
	a := c.Algorithms[fp.algo]
	switch fp.name {
	case "nvlink_efficiency":
		return a.NVLinkEfficiency
	case "net_efficiency":
		return a.NetEfficiency
	case "half_bytes":
		return a.HalfBytes
	case "net_half_bytes":
		return a.NetHalfBytes
	case "net_latency_us":
		return a.NetLatencyUS
	case "curve_exponent":
		if a.CurveExponent == 0 {
			return 1
		}
		return a.CurveExponent
	}
	return a.BaseLatencyUS
}

func (fp fitParam) set(p *ProfileInfo, v float64, source string) {
	c := p.Collectives
	if fp.algo == "" {
		switch fp.name {
		case "net_efficiency":
			c.P2P.NetEfficiency = v
		case "nvlink_efficiency":
			c.P2P.NVLinkEfficiency = v
		default:
			c.P2P.MessageOverheadUS = v
		}
		if source != "" {
			c.P2P.Sources = setKey(c.P2P.Sources, fp.name, source)
		}
		return
	}
	a := c.Algorithms[fp.algo]
	switch fp.name {
	case "nvlink_efficiency":
		a.NVLinkEfficiency = v
	case "net_efficiency":
		a.NetEfficiency = v
	case "half_bytes":
		a.HalfBytes = v
	case "net_half_bytes":
		a.NetHalfBytes = v
	case "net_latency_us":
		a.NetLatencyUS = v
	case "curve_exponent":
		a.CurveExponent = v
	default:
		a.BaseLatencyUS = v
	}
	if source != "" {
		a.Sources = setKey(a.Sources, fp.name, source)
	}
	c.Algorithms[fp.algo] = a
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// errFitDone is what pricing answers once the fit's context is done.
var errFitDone = errors.New("the fit's context is done")

// evaluator prices measurements, building one model per machine variant.
type evaluator struct {
	ms   []Measurement
	done <-chan struct{} // when closed, every objective is +Inf and the search ends
}

func newEvaluator(ms []Measurement) (*evaluator, error) {
	for _, m := range ms {
		if !(m.TimeUS > 0) || m.Bytes <= 0 || m.Ranks < 2 || m.Nodes < 1 {
			return nil, fmt.Errorf("%s: a measurement needs a positive time and size, 2 or more ranks and 1 or more nodes", m.Source)
		}
	}
	return &evaluator{ms: ms}, nil
}

func (ev *evaluator) errors(p ProfileInfo) ([]PointError, error) {
	models := map[string]*Fabric{}
	out := make([]PointError, 0, len(ev.ms))
	for _, m := range ev.ms {
		select {
		case <-ev.done:
			return nil, errFitDone
		default:
		}
		key := fmt.Sprintf("%d/%d/%g", m.Ranks, m.Nodes, m.NICGBps)
		f := models[key]
		if f == nil {
			var err error
			if f, err = New(MeasuredModel(p, m)); err != nil {
				return nil, err
			}
			models[key] = f
		}
		t, err := PriceMeasurement(f, m)
		if err != nil {
			return nil, err
		}
		out = append(out, PointError{Measurement: m, PredictedUS: t, Error: t/m.TimeUS - 1})
	}
	return out, nil
}

// objective is the mean squared log error, plus a weak pull of every figure towards
// the base profile's (so figures no point depends on keep their value).
func (ev *evaluator) objective(p ProfileInfo, params []fitParam, prior []float64) float64 {
	select {
	case <-ev.done:
		return math.Inf(1)
	default:
	}
	pe, err := ev.errors(p)
	if err != nil {
		return math.Inf(1)
	}
	s := 0.0
	for _, e := range pe {
		l := math.Log1p(e.Error)
		s += l * l
	}
	s /= float64(max(len(pe), 1))
	for i, fp := range params {
		v := fp.get(&p)
		d := (v - prior[i]) / (fp.hi - fp.lo)
		if fp.log {
			d = math.Log((v+1)/(prior[i]+1)) / math.Log((fp.hi+1)/(fp.lo+1))
		}
		s += 1e-4 * d * d
	}
	return s
}

// FitMinBytes is the least nccl-tests size Fit fits: the fidelity goal's range, where
// bandwidth dominates.
const FitMinBytes = 1 << 20

// FitContext fits base's collectives figures (per algorithm its NVLink and network
// efficiencies, efficiency-curve half size and base latency; the p2p transport's
// efficiencies and overhead) to the measurements of FitMinBytes and more, minimising
// the mean squared log error by coordinate search. The result keeps base's links and
// cites every fitted figure to the measurements' sources. PointError gives every
// measurement (of any size) priced on the result. Deterministic: the same points and
// base give the same figures. When ctx is done the search ends and FitContext answers
// ctx's error.
func FitContext(ctx context.Context, ms []Measurement, base ProfileInfo) (ProfileInfo, []PointError, error) {
	if base.Collectives == nil {
		return ProfileInfo{}, nil, errors.New("the base profile has no collectives figures to fit; start from a GPU profile such as h100")
	}
	if _, err := New(base); err != nil {
		return ProfileInfo{}, nil, err
	}
	var fitted []Measurement
	files := map[string]bool{}
	for _, m := range envelope(ms) {
		if m.Bytes >= FitMinBytes {
			fitted = append(fitted, m)
			file, _, _ := strings.Cut(m.Source, ":")
			files[file] = true
		}
	}
	all, err := newEvaluator(ms)
	if err != nil {
		return ProfileInfo{}, nil, err
	}
	p := base.clone()
	if p.Collectives.P2P == nil {
		p.Collectives.P2P = &P2PInfo{Transport: "nccl", NetEfficiency: 1}
	}
	ev := &evaluator{ms: fitted, done: ctx.Done()}
	params := fitParams(p.Collectives, fitted)
	prior := make([]float64, len(params))
	for i, fp := range params {
		prior[i] = fp.get(&p)
	}
	if len(fitted) > 0 {
		best := ev.objective(p, params, prior)
		for sweep := 0; sweep < 6; sweep++ {
			improved := false
			for _, fp := range params {
				v, obj := searchParam(ev, &p, fp, params, prior)
				if obj < best-1e-12 {
					fp.set(&p, v, "")
					best, improved = obj, true
				}
			}
			if !improved {
				break
			}
		}
		nelderMead(ev, &p, params, prior, best)
		if err := ctx.Err(); err != nil {
			return ProfileInfo{}, nil, err
		}
		src := "fitted by cost.Fit to nccl-tests measurements >= 1 MiB: " + strings.Join(slices.Sorted(mapsKeys(files)), ", ")
		for i, fp := range params {
			if fp.get(&p) != prior[i] {
				fp.set(&p, fp.get(&p), src)
			}
		}
	}
	if _, err := New(p); err != nil {
		return ProfileInfo{}, nil, err
	}
	pe, err := all.errors(p)
	if err != nil {
		return ProfileInfo{}, nil, err
	}
	return p, pe, nil
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// fitParams lists the figures of c that the measurements ms determine, in a fixed
// order: an algorithm's figures from the collectives it runs (ring: all_gather and
// reduce_scatter, and all_reduce across nodes where those are not measured, and
// inside a node without NVLS; tree, nvls, nvls_tree, collnet: all_reduce; alltoall: all_to_all;
// p2p: sendrecv), its NVLink figures from the scopes where it crosses NVLink and its
// network figures from groups across nodes.
func fitParams(c *CollectivesInfo, ms []Measurement) []fitParam {
	type use struct{ node, nodes, gpn bool }
	seen := map[Kind]*use{}
	for _, m := range ms {
		u := seen[m.Kind]
		if u == nil {
			u = &use{}
			seen[m.Kind] = u
		}
		switch m.Scope() {
		case ScopeNode:
			u.node = true
		case ScopeNodes:
			u.nodes = true
		default:
			u.gpn = true
		}
	}
	uses := func(kinds ...Kind) use {
		var out use
		for _, k := range kinds {
			if u := seen[k]; u != nil {
				out.node, out.nodes, out.gpn = out.node || u.node, out.nodes || u.nodes, out.gpn || u.gpn
			}
		}
		return out
	}
	var out []fitParam
	add := func(algo string, u use, nvInNodes bool) {
		nv := u.node
		if nvInNodes {
			nv = u.nodes
		}
		if nv {
			out = append(out, fitParam{algo: algo, name: "nvlink_efficiency", lo: 0.05, hi: 1})
		}
		if u.nodes || u.gpn {
			out = append(out, fitParam{algo: algo, name: "net_efficiency", lo: 0.05, hi: 1},
				fitParam{algo: algo, name: "net_half_bytes", lo: 0, hi: 1 << 30, log: true},
				fitParam{algo: algo, name: "net_latency_us", lo: 0, hi: 2000, log: true})
		}
		if u.node || u.nodes || u.gpn {
			out = append(out, fitParam{algo: algo, name: "curve_exponent", lo: 0.2, hi: 1})
		}
		if u.node {
			out = append(out, fitParam{algo: algo, name: "half_bytes", lo: 0, hi: 1 << 30, log: true},
				fitParam{algo: algo, name: "base_latency_us", lo: 0, hi: 500, log: true})
		}
	}
	for _, name := range algoNames {
		if _, ok := c.Algorithms[name]; !ok {
			continue
		}
		switch name {
		case "ring":
			// An all_reduce runs no faster than its ring: where no all_gather or
			// reduce_scatter measures the ring, all_reduce measurements bound it.
			u, ar := uses(AllGather, ReduceScatter), uses(AllReduce)
			u.node = u.node || ar.node && !c.NVLS // with NVLS, the switch reduces instead
			if !u.nodes && !u.gpn {
				u.nodes, u.gpn = ar.nodes, ar.gpn
			}
			add(name, u, false)
		case "nvls":
			add(name, use{node: uses(AllReduce).node}, false)
		case "tree", "nvls_tree", "collnet":
			u := uses(AllReduce)
			add(name, use{nodes: u.nodes, gpn: u.gpn}, true)
		case "alltoall":
			add(name, uses(AllToAll), false)
		}
	}
	if c.P2P != nil {
		u := uses(CollectivePermute)
		if u.node {
			out = append(out, fitParam{name: "nvlink_efficiency", lo: 0.05, hi: 1})
		}
		if u.nodes || u.gpn {
			out = append(out, fitParam{name: "net_efficiency", lo: 0.05, hi: 1},
				fitParam{name: "message_overhead_us", lo: 0, hi: 500, log: true})
		}
	}
	return out
}

// searchParam is the best value of fp over a grid and a golden-section refinement,
// with the objective there; p is left unchanged.
func searchParam(ev *evaluator, p *ProfileInfo, fp fitParam, params []fitParam, prior []float64) (float64, float64) {
	orig := fp.get(p)
	to := func(u float64) float64 { // u in [0, 1] to the figure
		if fp.log {
			return (fp.lo+1)*math.Pow((fp.hi+1)/(fp.lo+1), u) - 1
		}
		return fp.lo + u*(fp.hi-fp.lo)
	}
	eval := func(u float64) float64 {
		fp.set(p, to(u), "")
		return ev.objective(*p, params, prior)
	}
	const grid = 24
	bestU, bestObj := -1.0, math.Inf(1)
	for i := 0; i <= grid; i++ {
		u := float64(i) / grid
		if o := eval(u); o < bestObj {
			bestU, bestObj = u, o
		}
	}
	a, b := max(bestU-1.0/grid, 0), min(bestU+1.0/grid, 1)
	phi := (math.Sqrt(5) - 1) / 2
	c, d := b-phi*(b-a), a+phi*(b-a)
	fc, fd := eval(c), eval(d)
	for k := 0; k < 30; k++ {
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - phi*(b-a)
			fc = eval(c)
		} else {
			a, c, fc = c, d, fd
			d = a + phi*(b-a)
			fd = eval(d)
		}
	}
	u, obj := bestU, bestObj
	if fc < obj {
		u, obj = c, fc
	}
	if fd < obj {
		u, obj = d, fd
	}
	fp.set(p, orig, "")
	return to(u), obj
}

// toUnit and fromUnit map a figure to [0, 1] on its parameter's scale and back.
func (fp fitParam) toUnit(v float64) float64 {
	if fp.log {
		return math.Log((v+1)/(fp.lo+1)) / math.Log((fp.hi+1)/(fp.lo+1))
	}
	return (v - fp.lo) / (fp.hi - fp.lo)
}

func (fp fitParam) fromUnit(u float64) float64 {
	u = min(max(u, 0), 1)
	if fp.log {
		return (fp.lo+1)*math.Pow((fp.hi+1)/(fp.lo+1), u) - 1
	}
	return fp.lo + u*(fp.hi-fp.lo)
}

// nelderMead refines p's params jointly (Nelder-Mead on the unit cube, a fixed
// number of evaluations: deterministic), keeping p's values when it finds nothing
// better than best (their objective). It returns the objective of p's final values.
func nelderMead(ev *evaluator, p *ProfileInfo, params []fitParam, prior []float64, best float64) float64 {
	k := len(params)
	if k == 0 {
		return best
	}
	eval := func(x []float64) float64 {
		for i, fp := range params {
			fp.set(p, fp.fromUnit(x[i]), "")
		}
		return ev.objective(*p, params, prior)
	}
	x0 := make([]float64, k)
	for i, fp := range params {
		x0[i] = fp.toUnit(fp.get(p))
	}
	start := slices.Clone(x0)
	simplex := [][]float64{slices.Clone(x0)}
	for i := range k {
		x := slices.Clone(x0)
		if x[i] > 0.5 {
			x[i] -= 0.15
		} else {
			x[i] += 0.15
		}
		simplex = append(simplex, x)
	}
	vals := make([]float64, k+1)
	for i, x := range simplex {
		vals[i] = eval(x)
	}
	centroid := make([]float64, k)
	point := func(c []float64, x []float64, t float64) []float64 {
		out := make([]float64, k)
		for i := range out {
			out[i] = min(max(c[i]+t*(x[i]-c[i]), 0), 1)
		}
		return out
	}
	for iter := 0; iter < 150*k; iter++ {
		// Order: best first.
		idx := make([]int, k+1)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
		s2, v2 := make([][]float64, k+1), make([]float64, k+1)
		for i, j := range idx {
			s2[i], v2[i] = simplex[j], vals[j]
		}
		simplex, vals = s2, v2
		for i := range centroid {
			centroid[i] = 0
			for _, x := range simplex[:k] {
				centroid[i] += x[i] / float64(k)
			}
		}
		worst := simplex[k]
		r := point(centroid, worst, -1)
		fr := eval(r)
		switch {
		case fr < vals[0]:
			e := point(centroid, worst, -2)
			if fe := eval(e); fe < fr {
				simplex[k], vals[k] = e, fe
			} else {
				simplex[k], vals[k] = r, fr
			}
		case fr < vals[k-1]:
			simplex[k], vals[k] = r, fr
		default:
			c := point(centroid, worst, 0.5)
			if fc := eval(c); fc < vals[k] {
				simplex[k], vals[k] = c, fc
			} else {
				for i := 1; i <= k; i++ {
					simplex[i] = point(simplex[0], simplex[i], 0.5)
					vals[i] = eval(simplex[i])
				}
			}
		}
	}
	bi := 0
	for i := range vals {
		if vals[i] < vals[bi] {
			bi = i
		}
	}
	if vals[bi] < best {
		eval(simplex[bi])
		return vals[bi]
	}
	eval(start)
	return best
}

// envelope is ms with each time lowered to the least time of any measurement of the
// same source file, collective and group with as many or more bytes: a message never
// takes longer than a larger one (the Model contract), so a slower small one is noise
// (a first iteration, a busy fabric). Fit fits the envelope; its errors are reported
// against the measurements as given.
func envelope(ms []Measurement) []Measurement {
	out := slices.Clone(ms)
	key := func(m Measurement) string {
		file, _, _ := strings.Cut(m.Source, ":")
		return fmt.Sprintf("%s|%s|%d|%d|%g", file, m.Kind, m.Ranks, m.Nodes, m.NICGBps)
	}
	for i := range out {
		for _, o := range ms {
			if o.Bytes >= out[i].Bytes && o.TimeUS < out[i].TimeUS && key(o) == key(out[i]) {
				out[i].TimeUS = o.TimeUS
			}
		}
	}
	return out
}

// MeasurementsOf reads a parsed nccl-tests output as measurements, one per table row
// with a positive size and time (the out-of-place column), named source:line. The
// groups are res's ranks over its nodes; a header "nvlink_domain" (GPUs per NVLink
// domain, when a domain spans hosts as on a GB200 NVL72) counts a domain as one node,
// and a header "nic_gbps" gives the cluster's NIC rate per GPU.
func MeasurementsOf(res *nccltests.Result, source string) ([]Measurement, error) {
	kind, ok := nccltestsKinds[res.Collective]
	if !ok {
		return nil, fmt.Errorf("%s: collective %q cannot be priced; give all_gather, reduce_scatter, all_reduce, alltoall or sendrecv output", source, res.Collective)
	}
	ranks, nodes := res.Ranks, res.Nodes
	if ranks < 2 || nodes < 1 {
		return nil, fmt.Errorf("%s: the output does not say its ranks and nodes; add \"# ranks: N\" and \"# nodes: M\" header lines", source)
	}
	if d, err := headerFloat(res, "nvlink_domain"); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	} else if d > 0 {
		domain := min(int(d), ranks)
		nodes = max((ranks+domain-1)/domain, 1)
	}
	nic, err := headerFloat(res, "nic_gbps")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	var out []Measurement
	for _, p := range res.Points {
		if p.Bytes <= 0 || !(p.OutOfPlace.TimeUS > 0) {
			continue
		}
		out = append(out, Measurement{Source: fmt.Sprintf("%s:%d", source, p.Line), Kind: kind, Ranks: ranks, Nodes: nodes,
			Bytes: p.Bytes, TimeUS: p.OutOfPlace.TimeUS, NICGBps: nic})
	}
	return out, nil
}

var nccltestsKinds = map[nccltests.Collective]Kind{
	nccltests.AllGather: AllGather, nccltests.ReduceScatter: ReduceScatter, nccltests.AllReduce: AllReduce,
	nccltests.AllToAll: AllToAll, nccltests.SendRecv: CollectivePermute,
}

func headerFloat(res *nccltests.Result, key string) (float64, error) {
	s, ok := res.Header[key]
	if !ok {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.Fields(s + " x")[0], 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("header %q is %q; give a positive number", key, s)
	}
	return v, nil
}
