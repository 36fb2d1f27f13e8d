package transfer

import (
	"math"
)

// loads are a plan's bytes per phase per device on each resource, plus the distinct
// peers each device talks to per phase.
type loads struct {
	n      int
	phases []*phaseLoad
	// sent and recv are the bytes each device sends and receives over every phase.
	sent, recv []float64
}

type phaseLoad struct {
	nvOut, nvIn, nicOut, nicIn []float64
	pairs                      map[uint64]struct{}
	network                    bool
	ops                        map[string]bool
}

func newLoads(n int) *loads {
	return &loads{n: n, sent: make([]float64, n), recv: make([]float64, n)}
}

func (l *loads) phase(j int) *phaseLoad {
	for len(l.phases) <= j {
		l.phases = append(l.phases, &phaseLoad{
			nvOut: make([]float64, l.n), nvIn: make([]float64, l.n),
			nicOut: make([]float64, l.n), nicIn: make([]float64, l.n),
			pairs: map[uint64]struct{}{}, ops: map[string]bool{}})
	}
	return l.phases[j]
}

// add charges c's moves, each weight times (the tensors of the class).
func (l *loads) add(f *Fabric, c *class, moves []move, weight float64, op func(move) string) {
	for _, m := range moves {
		w := c.bytesOf(c.moveElems(m)) * weight
		ph := l.phase(int(m.phase))
		if f.Node(int(m.from)) == f.Node(int(m.to)) {
			ph.nvOut[m.from] += w
			ph.nvIn[m.to] += w
		} else {
			ph.nicOut[m.from] += w
			ph.nicIn[m.to] += w
			ph.network = true
		}
		l.sent[m.from] += w
		l.recv[m.to] += w
		ph.pairs[uint64(m.from)<<32|uint64(m.to)] = struct{}{}
		ph.ops[op(m)] = true
	}
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
		peers := make(map[int32]int)
		for k := range ph.pairs {
			peers[int32(k>>32)]++
			peers[int32(k&0xffffffff)]++
		}
		for _, v := range peers {
			pc.peers = max(pc.peers, v)
		}
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
				pc.lat = f.Base + f.NICLat
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
	// The fastest bucket count, then the most buckets (the least memory) within
	// bucketSlack of its time.
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
	out.peak, out.peakDev = peakAt(out.buckets)
	return out, true
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
