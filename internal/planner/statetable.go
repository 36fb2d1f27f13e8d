package planner

import "hash/maphash"

// stateTable is the search's table of what is known of each state (seen), keyed by
// state: open addressing with linear probing, at most half full. On testgen.RandomSet's
// set a lookup in it costs a fraction of a Go map's (which spent a twelfth of a median
// request's search hashing and matching control bytes). An entry whose pass is 0 is
// empty: the search numbers its passes from 1.
type stateTable[K searchKey] struct {
	slots []stateSlot[K]
	n     int
	shift uint // 64 - log2(len(slots))
}

type stateSlot[K searchKey] struct {
	key K
	v   seen
}

// minStateSlots is a new table's size.
const minStateSlots = 256

func newStateTable[K searchKey]() *stateTable[K] {
	t := &stateTable[K]{}
	t.alloc(minStateSlots)
	return t
}

func (t *stateTable[K]) alloc(n int) {
	t.slots = make([]stateSlot[K], n)
	t.n = 0
	t.shift = 64
	for m := n; m > 1; m >>= 1 {
		t.shift--
	}
}

// slot is where k is, or the empty slot where it would go.
func (t *stateTable[K]) slot(k K) *stateSlot[K] {
	mask := uint64(len(t.slots) - 1)
	for i := keyHash(k) >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.v.pass == 0 || s.key == k {
			return s
		}
	}
}

// get returns what is known of k, and whether anything is.
func (t *stateTable[K]) get(k K) (seen, bool) {
	s := t.slot(k)
	return s.v, s.v.pass != 0
}

// put records v (whose pass is not 0) for k.
func (t *stateTable[K]) put(k K, v seen) {
	s := t.slot(k)
	if s.v.pass == 0 {
		if 2*(t.n+1) > len(t.slots) {
			t.grow()
			s = t.slot(k)
		}
		t.n++
		s.key = k
	}
	s.v = v
}

func (t *stateTable[K]) grow() {
	old := t.slots
	t.alloc(2 * len(old))
	for i := range old {
		if o := &old[i]; o.v.pass != 0 {
			s := t.slot(o.key)
			*s = *o
			t.n++
		}
	}
}

// len is the number of states in the table.
func (t *stateTable[K]) len() int { return t.n }

// clear empties the table, keeping its size up to maxKeptStateSlots (a small search
// that reuses it should not spread its states over a big search's table).
func (t *stateTable[K]) clear() {
	if len(t.slots) > maxKeptStateSlots {
		t.alloc(minStateSlots)
		return
	}
	clear(t.slots)
	t.n = 0
}

// maxKeptStateSlots bounds the size a cleared table keeps.
const maxKeptStateSlots = 1 << 13

// keySeed seeds the hash of the keys that do not hash themselves (strings).
var keySeed = maphash.MakeSeed()

// keyHash mixes a state key into 64 bits whose top bits pick its slot.
func keyHash[K searchKey](k K) uint64 {
	switch k := any(k).(type) {
	case smallKey:
		return mix64(uint64(k))
	case packedKey:
		return mix64(k[0] ^ mix64(k[1]^mix64(k[2]^mix64(k[3]))))
	case stringKey:
		return maphash.String(keySeed, string(k))
	}
	panic("planner: unknown state key type")
}

// mix64 is a bijective mixer of 64 bits (the finalizer of splitmix64).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
