package cost

// This file routes one transfer on a ring or line axis: the links it loads and its hops.

// routeRing adds w bytes from a to b on an axis of n positions and topology topo (a
// line or a ring, the short way round; an antipodal transfer on a bidirectional ring
// split half each way) to the difference arrays buf, and returns the hops.
func routeRing(buf []float64, topo topology, n, a, b int, w float64) int {
	fwd := ((b-a)%n + n) % n
	switch topo {
	case line:
		if b > a {
			addRun(buf, n, 0, a, b-a, w)
		} else {
			addRun(buf, n, 1, a, a-b, w)
		}
		return abs(b - a)
	case ringUni:
		addRun(buf, n, 0, a, fwd, w)
		return fwd
	}
	// ringBidi
	back := n - fwd
	switch {
	case fwd < back:
		addRun(buf, n, 0, a, fwd, w)
		return fwd
	case back < fwd:
		addRun(buf, n, 1, a, back, w)
		return back
	}
	addRun(buf, n, 0, a, fwd, w/2)
	addRun(buf, n, 1, a, back, w/2)
	return fwd
}

// addRun adds w to the difference arrays buf (2 x (n+1): dir 0, then dir 1) on a run of
// length links. Links x -> x+1 (dir 0) for x in [start, start+length), mod n; dir 1 is
// x+1 -> x stored at index x, for x in [start-length, start) going down.
func addRun(buf []float64, n, dir, start, length int, w float64) {
	lo := start
	if dir == 1 {
		lo = start - length
	}
	lo = ((lo % n) + n) % n
	d := buf[dir*(n+1):]
	if hi := lo + length; hi <= n {
		d[lo] += w
		d[hi] -= w
	} else {
		d[lo] += w
		d[n] -= w
		d[0] += w
		d[hi-n] -= w
	}
}

// segmentHops is the hops of the route from a to b, as routeRing counts them.
func segmentHops(topo topology, n, a, b int) int {
	fwd := ((b-a)%n + n) % n
	switch topo {
	case line:
		return abs(b - a)
	case ringUni:
		return fwd
	}
	return min(fwd, n-fwd)
}
