package planner

import (
	"github.com/shardplan/shardplan/internal/sharding"
)

// LowerBound is API.md's lower bound for r: the most bytes of its target tile any
// device's source tile lacks, plus, when the source holds partial sums the target does
// not (group size p), (p-1) x min(target tile, source tile / p) where the reduced axes
// end up sharding the tensor (API.md says target tile; reducing on the smaller source
// buffer first can beat that, so the bound takes the smaller), or 2(p-1)/p of the smaller
// of the source and target tiles where they end up replicated.
func LowerBound(r *Request) int64 {
	return lowerBoundWith(r, LowerBoundBetween(r, r.Source, r.Target))
}

// lowerBoundWith is LowerBound given lb = LowerBoundBetween(r, r.Source, r.Target),
// which costs O(devices) and which Reshard also needs for the all_to_all_v candidate.
func lowerBoundWith(r *Request, lb int64) int64 {
	p := 1
	sharded := true
	inTarget := map[sharding.AxisRef]bool{}
	for _, d := range r.Target.Dims {
		for _, a := range d.Axes {
			inTarget[a] = true
		}
	}
	for _, u := range r.Source.Unreduced {
		if containsRef(r.Target.Unreduced, u) {
			continue
		}
		p *= u.Size
		covered := false
		for a := range inTarget {
			if a.Contains(u) {
				covered = true
			}
		}
		sharded = sharded && covered
	}
	if p == 1 {
		return lb
	}
	tgt, src := bufferBytes(r, r.Target), bufferBytes(r, r.Source)
	if sharded {
		// A reduce_scatter may run on the source buffer before anything else moves, so
		// the bound uses the smaller of the target tile and the source tile's 1/p share.
		return lb + int64(p-1)*min(tgt, src/int64(p))
	}
	return lb + 2*int64(p-1)*min(src, tgt)/int64(p)
}

func containsRef(refs []sharding.AxisRef, r sharding.AxisRef) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// LowerBoundBetween is the most bytes of its tile in `to` that any device's tile in
// `from` lacks (exact box arithmetic, padding excluded). It enumerates the coordinates
// of the mesh axes either sharding uses; axes both replicate do not change the answer.
func LowerBoundBetween(r *Request, from, to sharding.Sharding) int64 {
	m := r.Mesh
	lf := sharding.NewLayout(m, r.Shape, from)
	lt := sharding.NewLayout(m, r.Shape, to)
	usedAxis := make([]bool, len(m.Axes))
	for _, s := range []sharding.Sharding{from, to} {
		for _, d := range s.Dims {
			for _, a := range d.Axes {
				usedAxis[m.AxisIndex(a.Name)] = true
			}
		}
	}
	coords := make([]int, len(m.Axes))
	var worst int64
	var rec func(i int)
	rec = func(i int) {
		if i == len(m.Axes) {
			tgt, both := int64(1), int64(1)
			for d := range r.Shape {
				ts, te := lt.Range(d, lt.ShardIndex(d, coords))
				ss, se := lf.Range(d, lf.ShardIndex(d, coords))
				tgt *= te - ts
				both *= max(0, min(te, se)-max(ts, ss))
			}
			worst = max(worst, tgt-both)
			return
		}
		if !usedAxis[i] {
			coords[i] = 0
			rec(i + 1)
			return
		}
		for c := 0; c < m.Axes[i].Size; c++ {
			coords[i] = c
			rec(i + 1)
		}
	}
	rec(0)
	return sharding.BufferBytes(worst, r.ElemBits)
}
