package nccltests

import (
	"errors"
	"fmt"
	"math"
)

// BusBWFactor is the factor nccl-tests multiplies a collective's algorithm bandwidth by
// to print its bus bandwidth on n ranks (NVIDIA/nccl-tests doc/PERFORMANCE.md and the
// per-collective sources): all_reduce 2(n-1)/n; all_gather, reduce_scatter and alltoall
// (n-1)/n; sendrecv, broadcast and reduce 1. ok is false for other collectives and for
// n < 1.
func BusBWFactor(c Collective, n int) (factor float64, ok bool) {
	if n < 1 {
		return 0, false
	}
	fn := float64(n)
	switch c {
	case AllReduce:
		return 2 * (fn - 1) / fn, true
	case AllGather, ReduceScatter, AllToAll:
		return (fn - 1) / fn, true
	case SendRecv, Broadcast, Reduce:
		return 1, true
	}
	return 0, false
}

// Mismatch is a printed figure that does not follow from the others.
type Mismatch struct {
	Line    int     `json:"line"`
	InPlace bool    `json:"in_place"`
	Field   string  `json:"field"` // "busbw" or "algbw"
	Printed float64 `json:"printed"`
	Want    float64 `json:"want"`
}

func (m Mismatch) String() string {
	group := "out-of-place"
	if m.InPlace {
		group = "in-place"
	}
	return fmt.Sprintf("line %d %s %s: printed %g, the other columns give %.4f", m.Line, group, m.Field, m.Printed, m.Want)
}

// ErrUnchecked says CheckBusBW lacks the collective or the rank count.
var ErrUnchecked = errors.New("nccl-tests output: the collective or the rank count is unknown, so busbw cannot be checked")

// CheckBusBW verifies every row's printed figures against each other, within the
// rounding of the print: algbw = size / time, and busbw = algbw x BusBWFactor. It returns
// the rows that disagree, or ErrUnchecked when the collective or the rank count is
// unknown.
func (r *Result) CheckBusBW() ([]Mismatch, error) {
	f, ok := BusBWFactor(r.Collective, r.Ranks)
	if !ok {
		return nil, ErrUnchecked
	}
	var out []Mismatch
	for _, p := range r.Points {
		groups := []*Measurement{&p.OutOfPlace}
		if p.InPlace != nil {
			groups = append(groups, p.InPlace)
		}
		for gi, m := range groups {
			const half = 0.005 // algbw and busbw print with two decimals
			// busbw is computed from the unrounded algbw.
			if want := m.AlgBW * f; math.Abs(m.BusBW-want) > half*f+half+1e-9 {
				out = append(out, Mismatch{Line: p.Line, InPlace: gi == 1, Field: "busbw", Printed: m.BusBW, Want: want})
			}
			// algbw = bytes / time; the time is rounded to its last printed digit.
			if m.TimeUS > m.timeHalfUnit {
				lo := float64(p.Bytes) / ((m.TimeUS + m.timeHalfUnit) * 1e3)
				hi := float64(p.Bytes) / ((m.TimeUS - m.timeHalfUnit) * 1e3)
				if m.AlgBW < lo-half-1e-9 || m.AlgBW > hi+half+1e-9 {
					out = append(out, Mismatch{Line: p.Line, InPlace: gi == 1, Field: "algbw", Printed: m.AlgBW, Want: float64(p.Bytes) / (m.TimeUS * 1e3)})
				}
			}
		}
	}
	return out, nil
}
