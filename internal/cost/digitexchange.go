package cost

// sameClasses are the classes of digits that DigitPermutation.Same ties (union-find):
// per digit its class root, and per root the class's members.
type sameClasses struct {
	root    []int
	members map[int][]int
}

func classesOf(p DigitPermutation) sameClasses {
	uf := NewUnionFind(len(p.Digits))
	for k, j := range p.Same {
		if j >= 0 {
			uf.Union(k, j)
		}
	}
	c := sameClasses{root: make([]int, len(p.Digits)), members: map[int][]int{}}
	for k := range p.Digits {
		c.root[k] = uf.Find(k)
		c.members[c.root[k]] = append(c.members[c.root[k]], k)
	}
	return c
}

// tied reports whether digit k is in a class of two or more.
func (c sameClasses) tied(k int) bool { return len(c.members[c.root[k]]) > 1 }

// axisLoadExcluding is axisLoad for an exchange with Same: each assignment of the
// axis' segment digits S (and of the line digits L tied to others, which change the
// counts from one line to another) weighs its completions that are not left out. Of
// the completions of the digits outside S and L (mult of them), those left out number
// the product of the sizes of the classes wholly outside S and L, when the assignment
// keeps every class it touches equal, and none otherwise.
func (r *Router) axisLoadExcluding(axis int, p DigitPermutation, cls sameClasses, digits, S []int, lSet uint64, bytes, mult float64) (axisLoadRes, bool) {
	ex, ok := excludedOf(p, cls, S, lSet)
	if !ok {
		return axisLoadRes{}, false
	}
	if res, ok := r.axisLoadExcludingCounted(axis, p, digits, S, lSet, bytes, mult, ex); ok {
		return res, true
	}
	return r.axisLoadExcludingRouted(axis, p, digits, lSet, bytes, mult, ex), true
}

// excludedOf is axisLoadExcluding's excluded on the axis of segment digits S and line
// digits lSet; ok is false when its digits have too many assignments to enumerate.
func excludedOf(p DigitPermutation, cls sameClasses, S []int, lSet uint64) (excluded, bool) {
	var inS uint64
	for _, k := range S {
		inS |= 1 << k
	}
	E := append([]int(nil), S...)
	for k := range p.Digits {
		if lSet&(1<<k) != 0 && inS&(1<<k) == 0 && cls.tied(k) {
			E = append(E, k)
		}
	}
	if assignments(p.Digits, E) > maxDigitEnum {
		return excluded{}, false
	}
	var inEorL uint64 = lSet
	for _, k := range E {
		inEorL |= 1 << k
	}
	// The classes wholly outside S and L, and the checks of the classes E touches.
	left := 1.0
	var checks [][2]int // digit, the first digit of its class in E
	for rt, ms := range cls.members {
		first := -1
		for _, k := range ms {
			if inEorL&(1<<k) != 0 {
				first = k
				break
			}
		}
		if first < 0 {
			left *= float64(p.Digits[rt].Size)
			continue
		}
		for _, k := range ms {
			if k != first && inEorL&(1<<k) != 0 {
				checks = append(checks, [2]int{k, first})
			}
		}
	}
	// Line-class digits first (S ∩ L and the tied line digits), as lineLoads orders them.
	inLine := func(k int) bool { return lSet&(1<<k) != 0 }
	order := make([]int, 0, len(E))
	for _, in := range [2]bool{true, false} {
		for _, k := range E {
			if inLine(k) == in {
				order = append(order, k)
			}
		}
	}
	return excluded{order: order, checks: checks, left: left}, true
}

// excluded is what axisLoadExcluding finds of the transfers an exchange leaves out on
// one axis: the digits it enumerates (line digits first), the pairs of digits that
// must be equal for a transfer to be left out, and how many completions are left out
// when they are.
type excluded struct {
	order  []int
	checks [][2]int
	left   float64
}

// axisLoadExcludingRouted is axisLoadExcluding by routing every transfer.
func (r *Router) axisLoadExcludingRouted(axis int, p DigitPermutation, digits []int, lSet uint64, bytes, mult float64, ex excluded) axisLoadRes {
	inLine := func(k int) bool { return lSet&(1<<k) != 0 }
	order, checks, left := ex.order, ex.checks, ex.left
	rt := r.rt[axis]
	n := rt.n
	buf := make([]float64, 2*(n+1))
	val := make([]int, len(p.Digits))
	var res axisLoadRes
	var class uint64
	routed := 0.0
	eachAssignment(p.Digits, order, val, func() {
		var key uint64
		for _, k := range order {
			if inLine(k) {
				key = key*uint64(p.Digits[k].Size) + uint64(val[k])
			}
		}
		if key != class && routed > 0 {
			busiestLink(&res.w, axis, rt, buf, routed)
			clear(buf)
			routed = 0
		}
		class = key
		a, b := 0, 0
		for _, k := range digits {
			a += val[p.Src[k]] * p.Digits[k].Weight
			b += val[k] * p.Digits[k].Weight
		}
		if a == b {
			return
		}
		net := mult
		kept := true
		for _, c := range checks {
			if val[c[0]] != val[c[1]] {
				kept = false
				break
			}
		}
		if kept {
			net -= left
		}
		if net <= 0 {
			return
		}
		w := bytes * net
		routeRing(buf, rt.topo, n, a, b, w)
		routed += w
		res.calls++
	})
	if routed > 0 {
		busiestLink(&res.w, axis, rt, buf, routed)
	}
	res.used = res.calls > 0
	return res
}

// breaksClass reports whether the assignment val leaves some class of cls unequal among
// the digits of set (a bitmask): such a transfer is not left out.
func breaksClass(cls sameClasses, set uint64, val []int) bool {
	for _, ms := range cls.members {
		first := -1
		for _, k := range ms {
			if set&(1<<k) == 0 {
				continue
			}
			if first < 0 {
				first = k
			} else if val[k] != val[first] {
				return true
			}
		}
	}
	return false
}

// digitLongestRouteExcluding is digitLongestRoute for an exchange with Same (done false
// when nothing it leaves out can be the longest: some tied digit lies on no route, so
// every route has a completion that breaks its class). Otherwise every class lies in
// the routes' digits; the axes are grouped so that each class lies in one group, and a
// transfer is kept when some group's assignment breaks one of its classes: the longest
// is the best, over the groups with classes, of that group's longest breaking route
// plus every other group's longest route.
func (r *Router) digitLongestRouteExcluding(p DigitPermutation, onAxis [][]int, sSet []uint64, limit int) (lat float64, hops int, ok, done bool) {
	cls := classesOf(p)
	var onRoutes uint64
	for _, set := range sSet {
		onRoutes |= set
	}
	tiedAny := false
	for k := range p.Digits {
		if cls.tied(k) {
			tiedAny = true
			if onRoutes&(1<<k) == 0 {
				return 0, 0, false, false
			}
		}
	}
	if !tiedAny {
		return 0, 0, false, false
	}
	comp := coupledAxes(sSet)
	for _, ms := range cls.members {
		first := -1
		for _, k := range ms {
			for i := range sSet {
				if sSet[i]&(1<<k) != 0 {
					if first < 0 {
						first = i
					} else {
						comp.Union(first, i)
					}
				}
			}
		}
	}
	type groupRoute struct {
		lat, breakLat   float64
		hops, breakHops int
		breaks          bool
	}
	var groups []groupRoute
	for _, rg := range routeGroups(sSet, comp) {
		var g groupRoute
		if g.lat, g.hops, ok = r.groupLongestRoute(p, onAxis, rg.axes, rg.union, limit); !ok {
			return 0, 0, false, true
		}
		union := rg.union
		bl, bh, ok := r.groupLongestRouteOf(p, onAxis, rg.axes, union, limit, func(val []int) bool { return breaksClass(cls, union, val) })
		if !ok {
			return 0, 0, false, true
		}
		g.breakLat, g.breakHops, g.breaks = bl, bh, bh >= 0
		groups = append(groups, g)
	}
	lat, hops = -1, -1
	for gi, g := range groups {
		if !g.breaks {
			continue
		}
		l, h := g.breakLat, g.breakHops
		for hi, o := range groups {
			if hi != gi {
				l += o.lat
				h += o.hops
			}
		}
		lat, hops = max(lat, l), max(hops, h)
	}
	if hops < 0 {
		return 0, 0, false, true // every transfer is left out
	}
	return lat, hops, true, true
}
