package planner

import (
	"github.com/shardplan/shardplan/internal/cost"
)

// digitExchange is the direct all_to_all_v from before to after as a digit map with free
// digits (cost.Router.PriceDigitExchange), when its transfers are one: every dim tiled
// evenly in both states with the atom sizes equal position by position, and no atom
// paired (pattern.pairAtoms: an atom only after uses takes the digit of one only before
// uses, of equal size; there is none). Then a receiver's source tiles are those whose
// index shares its target index's digits: before's atom at position i of a dim copies
// the receiver's digit of after's atom at i, before's atoms past after's list are free
// (one transfer each), every other atom is the receiver's own, and every transfer moves
// the smaller of the two tiles. A transfer from the receiver's own tile is one whose
// holder is the receiver (nothing moves), as the pattern leaves it out.
//
// It also returns the transfers that move and the most one device sends or receives,
// counted from the map: a receiver gets one transfer per free assignment but the one
// from its own tile, which it holds when its digits meet every copy (digit k equal to
// digit Src[k]); a holder serves the receivers whose read digits are its own and
// whose unread ones are anything, one fewer when it is one of them.
func (sp *space) digitExchange(before, after state) (dp cost.DigitPermutation, maxPeers int, moving int64, ok bool) {
	n := len(sp.atoms)
	ub, ua := before.used(), after.used()
	for u := range n {
		if ub&(1<<u) != 0 || ua&(1<<u) == 0 {
			continue
		}
		for v := range n {
			if ub&(1<<v) != 0 && ua&(1<<v) == 0 && sp.atoms[u].Size == sp.atoms[v].Size {
				return dp, 0, 0, false // paired: holders spread by the pairing rule
			}
		}
	}
	elems := int64(1)
	src := make([]int, n, 2*n)
	digits := make([]cost.Digit, n, 2*n)
	for a, ref := range sp.atoms {
		src[a] = a
		digits[a] = cost.Digit{Axis: sp.mesh.AxisIndex(ref.Name), Size: ref.Size, Weight: ref.Minor()}
	}
	for d := range before {
		b, a := before[d], after[d]
		D := sp.shape[d]
		cb, ca := int64(sp.count(b)), int64(sp.count(a))
		if D%cb != 0 || D%ca != 0 {
			return dp, 0, 0, false
		}
		elems *= D / max(cb, ca)
		for i, k := range b {
			if i < len(a) {
				if sp.atoms[k].Size != sp.atoms[a[i]].Size {
					return dp, 0, 0, false
				}
				src[k] = int(a[i])
				continue
			}
			src[k] = len(digits) // a free digit
			src = append(src, len(digits))
			digits = append(digits, cost.Digit{Axis: -1, Size: sp.atoms[k].Size})
		}
	}
	if len(digits) > 64 {
		return dp, 0, 0, false // the router's digit sets are one word
	}
	free := int64(1)
	for _, dg := range digits[n:] {
		free *= int64(dg.Size)
	}
	// Receivers that hold one of their source tiles: digit k equal to digit src[k] for
	// every copied atom (union-find; the merged digits have one size).
	devices := int64(sp.mesh.NumDevices())
	mine := devices
	uf := cost.NewUnionFind(n)
	constrained := false
	for k := range n {
		if j := src[k]; j < n && j != k {
			constrained = true
			if uf.Union(k, j) {
				mine /= int64(sp.atoms[k].Size)
			}
		}
	}
	moving = devices*free - mine
	recv := int(free)
	if !constrained {
		recv-- // every receiver holds one of its tiles
	}
	// A holder's receivers: the receiver digits no holder digit reads are anything; the
	// holder digits reading one receiver digit must agree (ties). It is one of its own
	// receivers unless some copy is not implied by the ties.
	read := make([]bool, n)
	ties := cost.NewUnionFind(n)
	first := make([]int, len(digits))
	for i := range first {
		first[i] = -1
	}
	for k := range n {
		j := src[k]
		if j < n {
			read[j] = true
		}
		if f := first[j]; f < 0 {
			first[j] = k
		} else {
			ties.Union(k, f)
		}
	}
	served := int64(1)
	for j := range n {
		if !read[j] {
			served *= int64(sp.atoms[j].Size)
		}
	}
	implied := true
	for k := range n {
		if j := src[k]; j < n && j != k && ties.Find(k) != ties.Find(j) {
			implied = false
		}
	}
	if implied {
		served--
	}
	maxPeers = max(recv, int(served))
	dp = cost.DigitPermutation{Digits: digits, Src: src, Bytes: sp.bytes(elems)}
	return dp, maxPeers, moving, true
}
