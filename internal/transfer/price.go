package transfer

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"math"
	"slices"
)

// loads are a plan's bytes per phase per device on each resource, plus the distinct
// peers each device talks to per phase.
type loads struct {
	n      int
	phases []*phaseLoad
	// sent and recv are the bytes each device sends and receives over every phase.
	sent, recv []float64
	// peers memoizes maxPeers by the pair lists' hashes (shared by a planner's loads).
	peers map[uint64]int
}

type phaseLoad struct {
	nvOut, nvIn, nicOut, nicIn []float64
	// pairLists are the distinct (from<<32 | to) pairs of each class summary added, by
	// the hash of the list: classes with the same pattern count once.
	pairLists map[uint64][]uint64
	network   bool
	ops       map[string]bool
}

// summary is one class's moves under one strategy, per tensor: each phase's loads on
// the devices it touches, its distinct pairs and ops.
type summary struct {
	phases     []phaseSum
	devs       []int32   // devices that send or receive
	sent, recv []float64 // per entry of devs
}

type phaseSum struct {
	devs    []int32
	vals    [][4]float64 // nvOut, nvIn, nicOut, nicIn per entry of devs
	pairs   []uint64     // sorted, distinct
	hash    uint64
	network bool
	ops     []string
}

// summarize totals c's moves under a strategy (op names them).
func summarize(f *Fabric, c *class, moves []move, op func(move) string) *summary {
	var s summary
	type acc struct {
		loads map[int32]*[4]float64
		pairs map[uint64]struct{}
		ops   map[string]bool
		net   bool
	}
	var accs []*acc
	sent, recv := map[int32]float64{}, map[int32]float64{}
	for _, m := range moves {
		for len(accs) <= int(m.phase) {
			accs = append(accs, &acc{loads: map[int32]*[4]float64{}, pairs: map[uint64]struct{}{}, ops: map[string]bool{}})
		}
		a := accs[m.phase]
		w := c.bytesOf(c.moveElems(m))
		get := func(d int32) *[4]float64 {
			v := a.loads[d]
			if v == nil {
				v = new([4]float64)
				a.loads[d] = v
			}
			return v
		}
		if f.Node(int(m.from)) == f.Node(int(m.to)) {
			get(m.from)[0] += w
			get(m.to)[1] += w
		} else {
			get(m.from)[2] += w
			get(m.to)[3] += w
			a.net = true
		}
		sent[m.from] += w
		recv[m.to] += w
		a.pairs[uint64(m.from)<<32|uint64(m.to)] = struct{}{}
		a.ops[op(m)] = true
	}
	for _, a := range accs {
		var ps phaseSum
		ps.network = a.net
		for d := range a.loads {
			ps.devs = append(ps.devs, d)
		}
		slices.Sort(ps.devs)
		for _, d := range ps.devs {
			ps.vals = append(ps.vals, *a.loads[d])
		}
		for pr := range a.pairs {
			ps.pairs = append(ps.pairs, pr)
		}
		slices.Sort(ps.pairs)
		h := fnv.New64a()
		var buf [8]byte
		for _, pr := range ps.pairs {
			binary.LittleEndian.PutUint64(buf[:], pr)
			h.Write(buf[:])
		}
		ps.hash = h.Sum64()
		for o := range a.ops {
			ps.ops = append(ps.ops, o)
		}
		slices.Sort(ps.ops)
		s.phases = append(s.phases, ps)
	}
	for d := range sent {
		s.devs = append(s.devs, d)
	}
	for d := range recv {
		if _, ok := sent[d]; !ok {
			s.devs = append(s.devs, d)
		}
	}
	slices.Sort(s.devs)
	for _, d := range s.devs {
		s.sent = append(s.sent, sent[d])
		s.recv = append(s.recv, recv[d])
	}
	return &s
}

// addSummary charges a class summary, weight times (the tensors of the class).
func (l *loads) addSummary(s *summary, weight float64) {
	for j := range s.phases {
		ps := &s.phases[j]
		ph := l.phase(j)
		for k, d := range ps.devs {
			v := &ps.vals[k]
			ph.nvOut[d] += weight * v[0]
			ph.nvIn[d] += weight * v[1]
			ph.nicOut[d] += weight * v[2]
			ph.nicIn[d] += weight * v[3]
		}
		if len(ps.pairs) > 0 {
			ph.pairLists[ps.hash] = ps.pairs
		}
		ph.network = ph.network || ps.network
		for _, o := range ps.ops {
			ph.ops[o] = true
		}
	}
	for k, d := range s.devs {
		l.sent[d] += weight * s.sent[k]
		l.recv[d] += weight * s.recv[k]
	}
}

func newLoads(n int) *loads {
	return &loads{n: n, sent: make([]float64, n), recv: make([]float64, n)}
}

func (l *loads) phase(j int) *phaseLoad {
	for len(l.phases) <= j {
		l.phases = append(l.phases, &phaseLoad{
			nvOut: make([]float64, l.n), nvIn: make([]float64, l.n),
			nicOut: make([]float64, l.n), nicIn: make([]float64, l.n),
			pairLists: map[uint64][]uint64{}, ops: map[string]bool{}})
	}
	return l.phases[j]
}

// phaseCost is one phase priced for all the plan's data.
type phaseCost struct {
	bw       float64 // µs: the busiest resource's bytes over its bandwidth
	lat      float64 // µs per bucket
	network  bool
	nvBytes  float64
	netBytes float64
	peers    int
	bound    string // the busiest resource
}

// priced is a plan's time with its chosen bucket count.
type priced struct {
	timeUS   float64
	bestUS   float64 // the least time at any bucket count (timeUS is within bucketSlack of it)
	buckets  int
	phases   []phaseCost
	period   float64 // µs per bucket in the steady state
	netBytes float64
	nvBytes  float64
	peak     float64 // bytes per device, the largest
	peakDev  int
	minPeak  float64 // the least peak any bucket count reaches (for a budget error)
}

// price prices l: every bucket count from 1 up to maxBuckets, the fastest whose peak
// memory fits budget (0: none). resident is each device's bytes held throughout;
// total is the bytes of every tensor (bucket sizes are a share of it). ok is false
// when no bucket count fits.
func price(f *Fabric, l *loads, resident []float64, total float64, budget int64, maxBuckets int) (priced, bool) {
	var out priced
	n := l.n
	var totNV, totNICOut, totNICIn, totNVIn []float64
	if len(l.phases) > 1 {
		totNV, totNVIn, totNICOut, totNICIn = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	}
	alphaMin := min(f.NVLinkLat, f.NICLat)
	for _, ph := range l.phases {
		var pc phaseCost
		pc.network = ph.network
		pc.peers = l.maxPeers(ph.pairLists)
		for d := range n {
			for _, r := range [...]struct {
				v  float64
				bw float64
				nm string
			}{{ph.nvOut[d], f.NVLinkBW, "nvlink_out"}, {ph.nvIn[d], f.NVLinkBW, "nvlink_in"}, {ph.nicOut[d], f.NICBW, "nic_out"}, {ph.nicIn[d], f.NICBW, "nic_in"}} {
				if t := r.v / r.bw; t > pc.bw {
					pc.bw = t
					pc.bound = r.nm
				}
			}
			pc.nvBytes += ph.nvIn[d]
			pc.netBytes += ph.nicIn[d]
			if totNV != nil {
				totNV[d] += ph.nvOut[d]
				totNVIn[d] += ph.nvIn[d]
				totNICOut[d] += ph.nicOut[d]
				totNICIn[d] += ph.nicIn[d]
			}
		}
		if pc.nvBytes+pc.netBytes > 0 {
			pc.lat = f.Base + f.NVLinkLat
			if ph.network {
				pc.lat = f.Base + f.NICLat + f.NICOverhead
			}
			pc.lat += alphaMin * float64(max(pc.peers-1, 0))
		}
		out.netBytes += pc.netBytes
		out.nvBytes += pc.nvBytes
		out.phases = append(out.phases, pc)
	}
	// The busiest resource over all phases.
	busiest := 0.0
	if totNV != nil {
		for d := range n {
			busiest = max(busiest, totNV[d]/f.NVLinkBW, totNVIn[d]/f.NVLinkBW, totNICOut[d]/f.NICBW, totNICIn[d]/f.NICBW)
		}
	} else if len(out.phases) == 1 {
		busiest = out.phases[0].bw
	}
	// Memory: resident plus two buckets of what a device sends and receives.
	peakAt := func(k int) (float64, int) {
		best, dev := 0.0, 0
		for d := range n {
			if v := resident[d] + 2*(l.sent[d]+l.recv[d])/float64(k); v > best {
				best, dev = v, d
			}
		}
		return best, dev
	}
	kmax := max(1, maxBuckets)
	if total > 0 {
		kmax = max(1, min(kmax, int(total/minBucketBytes)))
	}
	out.minPeak, _ = peakAt(kmax)
	kmin := 1
	if budget > 0 {
		if out.minPeak > float64(budget) {
			return out, false
		}
		lo, hi := 1, kmax
		for lo < hi {
			mid := (lo + hi) / 2
			if p, _ := peakAt(mid); p <= float64(budget) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		kmin = lo
	}
	f.chooseBuckets(&out, busiest, kmin, kmax)
	out.peak, out.peakDev = peakAt(out.buckets)
	return out, true
}

// chooseBuckets sets out's time and bucket count from its phases: the fastest bucket
// count in [kmin, kmax], then the most buckets (the least memory) within bucketSlack
// of its time.
func (f *Fabric) chooseBuckets(out *priced, busiest float64, kmin, kmax int) {
	best := math.Inf(1)
	for k := kmin; k <= kmax; k++ {
		if t, _ := f.pipeline(out.phases, busiest, k); t < best {
			best = t
		}
	}
	out.bestUS = best
	for k := kmax; k >= kmin; k-- {
		if t, period := f.pipeline(out.phases, busiest, k); t <= best*(1+bucketSlack) {
			out.timeUS, out.buckets, out.period = t, k, period
			break
		}
	}
	if len(out.phases) == 0 || out.netBytes+out.nvBytes == 0 {
		out.timeUS, out.bestUS, out.buckets, out.period = 0, 0, 1, 0
	}
}

// priceOne is price of one class summary alone, weight times, without a budget (its
// time only): the same phases and buckets, computed on the devices it touches.
func priceOne(f *Fabric, s *summary, weight, total float64, maxBuckets int) priced {
	var out priced
	tot := map[int32]*[4]float64{}
	bws := [4]float64{f.NVLinkBW, f.NVLinkBW, f.NICBW, f.NICBW}
	alphaMin := min(f.NVLinkLat, f.NICLat)
	for j := range s.phases {
		ps := &s.phases[j]
		pc := phaseCost{network: ps.network, peers: maxPeers(map[uint64][]uint64{ps.hash: ps.pairs})}
		for k, d := range ps.devs {
			v := ps.vals[k]
			t := tot[d]
			if t == nil {
				t = new([4]float64)
				tot[d] = t
			}
			for r := range 4 {
				t[r] += weight * v[r]
				pc.bw = max(pc.bw, weight*v[r]/bws[r])
			}
			pc.nvBytes += weight * v[1]
			pc.netBytes += weight * v[3]
		}
		if pc.nvBytes+pc.netBytes > 0 {
			pc.lat = f.Base + f.NVLinkLat
			if ps.network {
				pc.lat = f.Base + f.NICLat + f.NICOverhead
			}
			pc.lat += alphaMin * float64(max(pc.peers-1, 0))
		}
		out.netBytes += pc.netBytes
		out.nvBytes += pc.nvBytes
		out.phases = append(out.phases, pc)
	}
	busiest := 0.0
	for _, t := range tot {
		for r := range 4 {
			busiest = max(busiest, t[r]/bws[r])
		}
	}
	kmax := max(1, maxBuckets)
	if total > 0 {
		kmax = max(1, min(kmax, int(total/minBucketBytes)))
	}
	f.chooseBuckets(&out, busiest, 1, kmax)
	return out
}

// maxPeers is maxPeers of lists, memoized by their hashes.
func (l *loads) maxPeers(lists map[uint64][]uint64) int {
	if l.peers == nil {
		return maxPeers(lists)
	}
	hs := slices.Sorted(maps.Keys(lists))
	h := fnv.New64a()
	var buf [8]byte
	for _, v := range hs {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	key := h.Sum64()
	if v, ok := l.peers[key]; ok {
		return v
	}
	v := maxPeers(lists)
	l.peers[key] = v
	return v
}

// maxPeers is the most distinct devices one device sends to or receives from over the
// union of the pair lists.
func maxPeers(lists map[uint64][]uint64) int {
	count := func(pairs func(yield func(uint64) bool)) int {
		peers := map[uint32]int{}
		most := 0
		for k := range pairs {
			a, b := uint32(k>>32), uint32(k)
			peers[a]++
			peers[b]++
			most = max(most, peers[a], peers[b])
		}
		return most
	}
	if len(lists) == 1 {
		for _, l := range lists {
			return count(slices.Values(l))
		}
	}
	union := map[uint64]struct{}{}
	for _, l := range lists {
		for _, k := range l {
			union[k] = struct{}{}
		}
	}
	return count(maps.Keys(union))
}

// minBucketBytes is the smallest bucket the planner considers; bucketSlack is the
// share of time the planner gives up for smaller buckets (less staging memory).
const (
	minBucketBytes = 1 << 16
	bucketSlack    = 0.01
)

// pipeline is the time of phases run in k buckets: the first bucket's trip through
// every phase, then k-1 periods; the period is the slowest phase per bucket or the
// busiest resource's load over all phases per bucket.
func (f *Fabric) pipeline(phases []phaseCost, busiest float64, k int) (t, period float64) {
	fk := float64(k)
	period = busiest / fk
	for _, pc := range phases {
		if pc.nvBytes+pc.netBytes == 0 {
			continue
		}
		p := f.combine(pc.lat, pc.bw/fk)
		t += p
		period = max(period, p)
	}
	return t + (fk-1)*period, period
}
