package planner

import (
	"context"
	"slices"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The compact lists. A mesh of thousands of devices has as many collective_permute pairs
// and often many more all_to_all_v transfers, but they come from a few strided patterns
// (pattern.go): listed in the pattern's order, consecutive entries differ by the same
// step. A run is an entry, that step and a count; a client expands it with one loop.

// PairRun is Count collective_permute pairs: [From + i*FromStep, To + i*ToStep] for i in
// [0, Count).
type PairRun struct {
	From     int `json:"from"`
	To       int `json:"to"`
	FromStep int `json:"from_step"`
	ToStep   int `json:"to_step"`
	Count    int `json:"count"`
}

// TransferRun is Count transfers: the i-th is First with i times Step added to every
// number (from, to, each range bound, bytes).
type TransferRun struct {
	First Transfer `json:"first"`
	Step  Transfer `json:"step"`
	Count int      `json:"count"`
}

// PairRuns is Pairs as runs, in the pattern's order; complete is false (and runs nil)
// when more than maxRuns would be needed.
func PairRuns(m *sharding.Mesh, shape []int64, before, after sharding.Sharding, maxRuns int) (runs []PairRun, complete bool) {
	sp, ok := newSpace(m, shape, 8, before, after)
	if ok && m.DeviceIDs == nil {
		p := newPattern(sp, sp.stateOf(before), sp.stateOf(after), true, 1)
		if dp, ok := p.digitPermutation(); ok {
			return pairRunsByDigits(m, dp, maxRuns)
		}
	}
	return listedPairRuns(m, shape, before, after, sp, ok, maxRuns)
}

// listedPairRuns is PairRuns by listing the pairs in the pattern's order (over sp when
// ok, else by scanning the tiles) and joining them into runs.
func listedPairRuns(m *sharding.Mesh, shape []int64, before, after sharding.Sharding, sp *space, ok bool, maxRuns int) (runs []PairRun, complete bool) {
	var emit func(yield func(from, to int) bool)
	if ok {
		p := newPattern(sp, sp.stateOf(before), sp.stateOf(after), true, 1)
		p.withOwn = true
		emit = func(yield func(from, to int) bool) {
			p.eachDevice(func(from, to int, _ int64) bool {
				if p.curMine {
					from = to
				}
				return yield(m.DeviceAt(from), m.DeviceAt(to))
			})
		}
	} else {
		emit = func(yield func(from, to int) bool) {
			for _, pr := range pairsByScan(m, shape, before, after) {
				if !yield(pr[0], pr[1]) {
					return
				}
			}
		}
	}
	b := pairRuns{max: maxRuns}
	emit(b.add)
	return b.result()
}

// pairRuns builds PairRuns from pairs in order, up to max runs.
type pairRuns struct {
	runs []PairRun
	max  int
	over bool
}

// add extends the last run with [from, to] or starts a new one; false once over max.
func (b *pairRuns) add(from, to int) bool {
	if n := len(b.runs); n > 0 {
		r := &b.runs[n-1]
		df, dt := from-(r.From+(r.Count-1)*r.FromStep), to-(r.To+(r.Count-1)*r.ToStep)
		if r.Count == 1 {
			r.FromStep, r.ToStep, r.Count = df, dt, 2
			return true
		}
		if df == r.FromStep && dt == r.ToStep {
			r.Count++
			return true
		}
	}
	if len(b.runs) == b.max {
		b.over = true
		return false
	}
	b.runs = append(b.runs, PairRun{From: from, To: to, Count: 1})
	return true
}

// extend adds c pairs after the last one added, each (df, dt) from the one before: what
// c calls of add would do, in one.
func (b *pairRuns) extend(df, dt, c int) bool {
	r := &b.runs[len(b.runs)-1]
	switch {
	case r.Count == 1:
		r.FromStep, r.ToStep, r.Count = df, dt, 1+c
		return true
	case df == r.FromStep && dt == r.ToStep:
		r.Count += c
		return true
	}
	if len(b.runs) == b.max {
		b.over = true
		return false
	}
	from, to := r.From+(r.Count-1)*r.FromStep+df, r.To+(r.Count-1)*r.ToStep+dt
	run := PairRun{From: from, To: to, Count: 1}
	if c > 1 {
		run.FromStep, run.ToStep, run.Count = df, dt, c
	}
	b.runs = append(b.runs, run)
	return true
}

func (b *pairRuns) result() ([]PairRun, bool) {
	if b.over {
		return nil, false
	}
	return b.runs, true
}

// transferRuns builds TransferRuns from transfers in order, up to max runs. It keeps
// none of the transfers it is given (a run's first is a copy), and its buffers are
// reused from one to the next: a million transfers cost no allocation each.
type transferRuns struct {
	runs       []TransferRun
	max        int
	over       bool
	last, step []int64 // the current run's last transfer and step, flattened
	cur, diff  []int64 // scratch: the transfer being added, and its step from last
}

// add extends the last run with t or starts a new one; false once over max.
func (b *transferRuns) add(t Transfer) bool {
	b.cur = flatten(t, b.cur[:0])
	if n := len(b.runs); n > 0 {
		r := &b.runs[n-1]
		b.diff = b.diff[:0]
		for i, x := range b.cur {
			b.diff = append(b.diff, x-b.last[i])
		}
		if r.Count == 1 || slices.Equal(b.diff, b.step) {
			if r.Count == 1 {
				r.Step = unflatten(b.diff, len(t.Ranges))
				b.step = append(b.step[:0], b.diff...)
			}
			r.Count++
			b.last, b.cur = b.cur, b.last
			return true
		}
	}
	if len(b.runs) == b.max {
		b.over = true
		return false
	}
	b.runs = append(b.runs, TransferRun{First: unflatten(b.cur, len(t.Ranges)), Step: zeroTransfer(len(t.Ranges)), Count: 1})
	b.last, b.cur = b.cur, b.last
	return true
}

func (b *transferRuns) result() ([]TransferRun, bool) {
	if b.over {
		return nil, false
	}
	return b.runs, true
}

// TransferRunsContext is Transfers as runs, in the pattern's order; complete is false
// (and runs nil) when more than maxRuns would be needed. It stops with ctx's error once
// ctx is done.
func TransferRunsContext(ctx context.Context, m *sharding.Mesh, shape []int64, elemBits int, before, after sharding.Sharding, nearest bool, maxRuns int) (runs []TransferRun, complete bool, err error) {
	b := transferRuns{max: maxRuns}
	if err = eachTransfer(ctx, m, shape, elemBits, before, after, nearest, false, b.add); err != nil {
		return nil, !b.over, err
	}
	runs, complete = b.result()
	return runs, complete, nil
}

// Expand lists the transfers of r.
func (r TransferRun) Expand() []Transfer {
	f, s := flatten(r.First, nil), flatten(r.Step, nil)
	out := make([]Transfer, r.Count)
	v := make([]int64, len(f))
	for i := range r.Count {
		for j := range f {
			v[j] = f[j] + int64(i)*s[j]
		}
		out[i] = unflatten(v, len(r.First.Ranges))
	}
	return out
}

// Expand lists the pairs of r.
func (r PairRun) Expand() [][2]int {
	out := make([][2]int, r.Count)
	for i := range r.Count {
		out[i] = [2]int{r.From + i*r.FromStep, r.To + i*r.ToStep}
	}
	return out
}

func flatten(t Transfer, dst []int64) []int64 {
	dst = append(dst, int64(t.From), int64(t.To), t.Bytes)
	for _, rg := range []Range{t.Ranges, t.SourceLocal, t.TargetLocal} {
		for _, x := range rg {
			dst = append(dst, x[0], x[1])
		}
	}
	return dst
}

func unflatten(v []int64, rank int) Transfer {
	t := Transfer{From: int(v[0]), To: int(v[1]), Bytes: v[2]}
	k := 3
	for _, rg := range []*Range{&t.Ranges, &t.SourceLocal, &t.TargetLocal} {
		*rg = make(Range, rank)
		for d := range rank {
			(*rg)[d] = [2]int64{v[k], v[k+1]}
			k += 2
		}
	}
	return t
}

func zeroTransfer(rank int) Transfer { return unflatten(make([]int64, 3+6*rank), rank) }

// pairDigit is one digit of the receivers' odometer in pairRunsByDigits: its size, and
// what a unit of it adds to the receiver's device id and to its holder's.
type pairDigit struct{ size, to, from int }

// pairRunsByDigits is PairRuns when the pattern is the digit permutation dp on a mesh
// in row-major device order: the pairs come in the order the pattern lists them
// (receivers by atom digits, then by the coordinates of the axes without atoms, the
// last fastest), and both ends are linear in the receiver's digits, so consecutive
// pairs differ by one of a few steps, the step of the digit the odometer carries into.
// The runs are written from those steps, a whole innermost block at a time, without
// listing the pairs: the same runs as pairRuns.add over the pattern's pairs. Cost:
// O(devices / innermost block + runs).
func pairRunsByDigits(m *sharding.Mesh, dp cost.DigitPermutation, maxRuns int) ([]PairRun, bool) {
	stride := make([]int, len(m.Axes))
	s := 1
	for i := len(m.Axes) - 1; i >= 0; i-- {
		stride[i] = s
		s *= m.Axes[i].Size
	}
	digits := make([]pairDigit, 0, len(dp.Digits)+len(m.Axes))
	hasAtoms := make([]bool, len(m.Axes))
	for k, dg := range dp.Digits {
		hasAtoms[dg.Axis] = true
		d := pairDigit{size: dg.Size, to: dg.Weight * stride[dg.Axis]}
		for j, src := range dp.Src {
			if src == k { // the holder's digit j is the receiver's digit k
				d.from += dp.Digits[j].Weight * stride[dp.Digits[j].Axis]
			}
		}
		digits = append(digits, d)
	}
	for i, ax := range m.Axes {
		if !hasAtoms[i] {
			digits = append(digits, pairDigit{size: ax.Size, to: stride[i], from: stride[i]})
		}
	}
	// Merge a digit into the one after it when it continues it (its unit is a whole turn
	// of the next), and drop digits of size 1: the pairs' sequence is the same.
	var ds []pairDigit
	for i := len(digits) - 1; i >= 0; i-- {
		d := digits[i]
		if d.size == 1 {
			continue
		}
		if n := len(ds); n > 0 && d.to == ds[n-1].size*ds[n-1].to && d.from == ds[n-1].size*ds[n-1].from {
			ds[n-1].size *= d.size
			continue
		}
		ds = append(ds, d)
	}
	slices.Reverse(ds)
	b := pairRuns{max: maxRuns}
	if len(ds) == 0 {
		b.add(0, 0)
		return b.result()
	}
	// carry[j]: the step from the last receiver of a turn of the digits after j to the
	// next receiver, which adds one to digit j.
	carry := make([]pairDigit, len(ds))
	for j := range ds {
		carry[j] = ds[j]
		for _, d := range ds[j+1:] {
			carry[j].to -= (d.size - 1) * d.to
			carry[j].from -= (d.size - 1) * d.from
		}
	}
	inner := len(ds) - 1
	odo := make([]int, inner)
	if !b.add(0, 0) {
		return b.result()
	}
	for {
		if !b.extend(ds[inner].from, ds[inner].to, ds[inner].size-1) {
			return b.result()
		}
		j := inner - 1
		for ; j >= 0; j-- {
			if odo[j]++; odo[j] < ds[j].size {
				break
			}
			odo[j] = 0
		}
		if j < 0 {
			return b.result()
		}
		if !b.extend(carry[j].from, carry[j].to, 1) {
			return b.result()
		}
	}
}
