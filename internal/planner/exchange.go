package planner

import (
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// digitExchange is the direct all_to_all_v from before to after, with the spread or the
// nearest holders (newPatternHolders), as a digit map with free digits
// (cost.Router.PriceDigitExchange), when its transfers are one: every dim tiled
// evenly in both states with the atom sizes equal position by position. Then a
// receiver's source tiles are those whose index shares its target index's digits:
// before's atom at position i of a dim copies the receiver's digit of after's atom at i,
// before's atoms past after's list are free (one transfer each), a paired atom
// (pattern.pairAtoms: one only after uses, given the digit of one only before uses)
// copies its partner's digit, every other atom is the receiver's own, and every
// transfer moves the smaller of the two tiles. The pattern leaves out the transfer from
// the receiver's own tile (every one of before's digits equal to the receiver's):
// without a pairing its holder is the receiver, so it moves nothing; with one, the
// router is told to leave it out (DigitPermutation.Same).
//
// It also returns the transfers that move and the most one device sends or receives:
// counted in closed form without a pairing (unpairedExchangeCounts), by enumerating
// them with one (pairedExchangeCounts).
func (sp *space) digitExchange(before, after state, nearest bool) (dp cost.DigitPermutation, maxPeers int, moving int64, ok bool) {
	n := len(sp.atoms)
	holderOf := newPatternHolders(sp, before, after, false, 0, nearest).holderOf
	paired := false
	for u, v := range holderOf {
		paired = paired || int(v) != u
	}
	elems := int64(1)
	src := make([]int, n, 2*n)
	same := make([]int, n, 2*n)
	digits := make([]cost.Digit, n, 2*n)
	for a, ref := range sp.atoms {
		src[a], same[a] = int(holderOf[a]), -1
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
			} else {
				src[k] = len(digits) // a free digit
				src = append(src, len(digits))
				same = append(same, -1)
				digits = append(digits, cost.Digit{Axis: -1, Size: sp.atoms[k].Size})
			}
			same[k] = src[k] // the receiver's own tile: every such digit equal
		}
	}
	if len(digits) > 64 {
		return dp, 0, 0, false // the router's digit sets are one word
	}
	dp = cost.DigitPermutation{Digits: digits, Src: src, Bytes: sp.bytes(elems)}
	if paired {
		// A paired atom takes its partner's digit, so the transfers from a receiver's
		// own tile have another holder: the router leaves them out (Same).
		dp.Same = same
		maxPeers, moving = pairedExchangeCounts(int64(sp.mesh.NumDevices()), n, digits, src, same)
		return dp, maxPeers, moving, true
	}
	maxPeers, moving = unpairedExchangeCounts(sp, n, digits, src)
	return dp, maxPeers, moving, true
}

// exchangeDigits is digitExchange, also where sp's atoms are coarser than prime (big
// meshes: newSpace keeps whole axes past maxPrimeAtoms) and position by position sizes
// differ only for that: then the exchange is tried in the space of prime atoms, where
// a dim sharded [x] (64) against [y, z] (32, 32) lines up as 2s. Tile geometry alone
// decides which source tiles a receiver asks for, so the transfers are the same in
// both spaces; the holders are too when no atom is paired (before and after use the
// same atoms: a holder's digits past before's atoms are the receiver's in both), which
// is the only case tried there.
func (sp *space) exchangeDigits(before, after state, nearest bool) (dp cost.DigitPermutation, maxPeers int, moving int64, ok bool) {
	if dp, maxPeers, moving, ok = sp.digitExchange(before, after, nearest); ok || before.used() != after.used() {
		return dp, maxPeers, moving, ok
	}
	fine, parts := sp.primeSpace()
	if fine == nil {
		return dp, maxPeers, moving, false
	}
	return fine.digitExchange(refineState(before, parts), refineState(after, parts), nearest)
}

// primeSpace is sp with every atom split into its prime factors, major first, and each
// of sp's atoms as its run of the new ones (nil when sp's atoms are prime already, or
// when there would be more than 60). It prices; the search never sees it.
func (sp *space) primeSpace() (*space, [][]uint8) {
	n := 0
	for _, a := range sp.atoms {
		n += len(primeFactors(a.Size))
	}
	if n == len(sp.atoms) || n > 60 {
		return nil, nil
	}
	fine := &space{mesh: sp.mesh, shape: sp.shape, elemBits: sp.elemBits, atoms: make([]sharding.AxisRef, 0, n), done: sp.done}
	parts := make([][]uint8, len(sp.atoms))
	for i, a := range sp.atoms {
		pre := a.Pre
		for _, p := range primeFactors(a.Size) {
			parts[i] = append(parts[i], uint8(len(fine.atoms)))
			fine.atoms = append(fine.atoms, a.Sub(pre, p))
			pre *= p
		}
	}
	fine.setBinary()
	return fine, parts
}

// refineState is st with each atom replaced by its run parts[atom].
func refineState(st state, parts [][]uint8) state {
	out := make(state, len(st))
	for d, ids := range st {
		for _, a := range ids {
			out[d] = append(out[d], parts[a]...)
		}
	}
	return out
}

// pairedExchangeCounts counts, when atoms are paired, the transfers that move (over
// devices, all the mesh's) and the most one device sends or receives, in closed form.
// The first n digits are the receiver's (the atoms), the others free (each the holder's
// digit of one atom before uses, src[k] = f); the holder's digit k is digit src[k]; a
// transfer is left out when digit k equals digit same[k] for every k with same[k] >= 0
// (the receiver's own tile). exchangeCountsByEnumeration (tests) is the reference.
//
// A receiver's transfers: one per assignment of the free digits, less the one that is
// its own tile when it meets the equalities between its digits (a free digit equal to a
// receiver digit is one assignment). A holder's: one per assignment of the receiver
// digits no holder digit reads (M), less those that are the receiver's own tile (M',
// the unread digits the equalities do not fix) when the holder's digits meet the
// equalities, which the holder digits reading one digit (ties) may imply for all.
func pairedExchangeCounts(devices int64, n int, digits []cost.Digit, src, same []int) (maxPeers int, moving int64) {
	free := int64(1)
	for _, dg := range digits[n:] {
		free *= int64(dg.Size)
	}
	mine := devices // receivers that meet the equalities, over the whole mesh
	uf := cost.NewUnionFind(n)
	constrained := false
	for k := range n {
		if j := same[k]; j >= 0 && j < n && j != k {
			constrained = true
			if uf.Union(k, j) {
				mine /= int64(digits[k].Size)
			}
		}
	}
	moving = devices*free - mine
	recv := int(free)
	if !constrained {
		recv-- // every receiver meets them
	}
	read := make([]bool, len(digits))
	by := make([]int, len(digits)) // a holder digit reading each digit (-1: none)
	for i := range by {
		by[i] = -1
	}
	ties := cost.NewUnionFind(n)
	for k := range n {
		d := src[k]
		read[d] = true
		if by[d] < 0 {
			by[d] = k
		} else {
			ties.Union(k, by[d])
		}
	}
	unread, unfixed := int64(1), int64(1)
	for d := range n {
		if !read[d] {
			unread *= int64(digits[d].Size)
			if same[d] < 0 {
				unfixed *= int64(digits[d].Size)
			}
		}
	}
	implied := true
	for k := range n {
		if same[k] >= 0 && read[k] && ties.Find(by[k]) != ties.Find(k) {
			implied = false // a holder whose digits k and by[k] differ sends its own tile to no one
		}
	}
	send := unread
	if implied {
		send -= unfixed
	}
	return max(recv, int(send)), moving
}

// unpairedExchangeCounts is pairedExchangeCounts when no atom is paired (the
// first n digits are the atoms, the others free).
func unpairedExchangeCounts(sp *space, n int, digits []cost.Digit, src []int) (maxPeers int, moving int64) {
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
	return max(recv, int(served)), moving
}
