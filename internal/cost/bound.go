package cost

import "math"

// LowerBound is the physical lower bound of COSTMODEL.md (c) for c on this model's
// links: no schedule can take less. BandwidthUS is the largest of the bytes bound (the
// bytes a device must send or receive over its total injection bandwidth on the group's
// links) and, for an all_to_all within one torus level, the bisection bound. LatencyUS
// is the group's diameter in steps times the per-step latency, or for a
// collective_permute and all_to_all_v the distance c.Hops on the cheapest level (base
// latencies, being software overhead, are left out). TimeUS is the larger of the two;
// Link is the slowest link class of the group. Estimate never returns less in any of
// the three terms, which also makes LowerBound an admissible heuristic for a search.
func (f *Fabric) LowerBound(c Collective) Estimate {
	var pbuf [maxParts]part
	var lbuf, sbuf [numLinks]level
	parts := f.parts(&c, pbuf[:0])
	lv := levels(parts, &lbuf)
	if len(lv) == 0 {
		return Estimate{}
	}
	e := Estimate{Link: byThroughput(lv, &sbuf)[len(lv)-1].class.String()}
	if c.Bytes <= 0 {
		return e
	}
	v := float64(c.Bytes)
	d := max(c.Hops, 1)
	n, inj, diam, p2p := 1, 0.0, 0.0, math.Inf(1)
	for _, l := range lv {
		n = mulSat(n, l.n)
		inj += l.thr
		steps, hops := 1, 1
		if ps := parts[l.lo:l.hi]; ps[0].topo != switched {
			steps = 0
			for _, p := range ps {
				steps += diameter(p)
			}
			hops = distance(ps, d)
		}
		diam += float64(steps) * f.links[l.class].lat
		p2p = min(p2p, float64(hops)*f.links[l.class].lat)
	}
	fn := float64(n)
	switch c.Kind {
	case AllGather, ReduceScatter:
		e.BandwidthUS = (fn - 1) / fn * v / inj
	case AllToAll:
		e.BandwidthUS = (fn - 1) / (fn * fn) * v / inj
		if len(lv) == 1 && parts[0].topo != switched {
			for _, p := range parts {
				// Cut perpendicular to p: ⌊N_i/2⌋⌈N_i/2⌉/N_i² of V crosses it one
				// way, over c_i*N/N_i links.
				ni := float64(p.n)
				half := float64(p.n/2) * float64((p.n+1)/2)
				links := float64(wrapFactor(p.topo)) * fn / ni
				e.BandwidthUS = max(e.BandwidthUS, half/(ni*ni)*v/(links*p.bw))
			}
		}
	case CollectivePermute, AllToAllV:
		e.BandwidthUS = v / inj
		diam = p2p // the farthest transfer travels its distance on some level
	default: // AllReduce, and unknown kinds as Estimate prices them
		e.BandwidthUS = 2 * (fn - 1) / fn * v / inj
		if f.reducesInNetwork(lv) {
			// A switch that reduces lets a device send its array once and receive
			// the sum once: what it lacks is the others' share.
			e.BandwidthUS = (fn - 1) / fn * v / inj
		}
	}
	e.LatencyUS = diam
	e.TimeUS = max(e.LatencyUS, e.BandwidthUS)
	return e
}

// reducesInNetwork reports whether a switch of the group's levels can reduce (NVLS on
// an nvlink level, CollNet on an ib level).
func (f *Fabric) reducesInNetwork(lv []level) bool {
	if f.coll == nil {
		return false
	}
	for _, l := range lv {
		if l.class == linkNVLink && f.coll.nvls || l.class == linkIB && f.coll.collnet {
			return true
		}
	}
	return false
}
