package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// A response budget: the per-device lists an answer can carry (transfers, pairs, tiles)
// grow with devices x tiles, so a 146-byte request can ask for hundreds of megabytes.
// Before a list is built, its encoded size is bounded from counts (planner.TransferCount,
// the device count) and charged to the request's budget (Limits.MaxResponseBytes); over
// it, the request is refused with 422 response-too-large naming the limit and how to ask
// for less. The bounds are upper bounds, so a refused answer may have fitted; an
// accepted one always fits.

// listBudget tracks the estimated bytes of the lists an answer will carry. limit <= 0:
// unlimited.
type listBudget struct {
	limit int64
	used  int64
}

func (s *Server) newBudget() *listBudget { return &listBudget{limit: s.limits.MaxResponseBytes} }

// charge adds n bytes for field (the include entry or list that asked for them) and
// fails with a 422 once the estimate passes the limit. fix says how to ask for less.
func (b *listBudget) charge(field string, n int64, what, fix string) error {
	b.used += n
	if b.limit <= 0 || b.used <= b.limit {
		return nil
	}
	return responseTooLarge(field, b.used, b.limit, what, fix)
}

func responseTooLarge(field string, estimate, limit int64, what, fix string) *Problem {
	fe := sharding.Fieldf(field, "the answer would be about %s (%s), over the response limit of %s (SHARDPLAN_MAX_RESPONSE_BYTES); %s",
		mib(estimate), what, mib(limit), fix)
	p := Invalid(slugResponseTooLarge, "Response too large", fe)
	p.Status = http.StatusUnprocessableEntity
	return p
}

func mib(n int64) string {
	if n < 1<<20 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

// digits is the number of decimal digits of n >= 0.
func digits(n int64) int64 {
	d := int64(1)
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// listShape holds what bounds the encoded size of one list entry.
type listShape struct {
	devices, rank, axes int64
	idDigits, dimDigits int64
}

func newListShape(m *sharding.Mesh, shape []int64) listShape {
	maxDim := int64(1)
	for _, d := range shape {
		maxDim = max(maxDim, d)
	}
	n := int64(m.NumDevices())
	return listShape{devices: n, rank: int64(len(shape)), axes: int64(len(m.Axes)), idDigits: digits(n), dimDigits: digits(maxDim)}
}

// rangesBytes bounds a JSON [[s,e],...] of rank ranges.
func (l listShape) rangesBytes() int64 { return 2 + l.rank*(4+2*l.dimDigits) }

// transferBytes bounds one encoded Transfer with its separating comma:
// {"from":F,"to":F,"ranges":R,"source_local":R,"target_local":R,"bytes":B}.
func (l listShape) transferBytes() int64 { return 70 + 2*l.idDigits + 3*l.rangesBytes() + 20 }

// pairRunBytes bounds one encoded PairRun with its comma.
func (l listShape) pairRunBytes() int64 { return 60 + 4*l.idDigits + 2*digits(l.devices) }

// maxRunTransfers caps the transfers enumerated to build a step's compact runs: past
// it the list is left out (lists_omitted) rather than walked.
const maxRunTransfers = 1 << 21

// listsNote explains lists_omitted on a mesh above the list limit.
const listsNote = "the mesh has %d devices, more than the list limit of %d (SHARDPLAN_LIST_DEVICE_LIMIT): collective_permute pairs and all_to_all_v transfers that do not compress into runs (pair_runs, transfer_runs) are left out; add \"pairs\" to include for the explicit lists"

// pairBytes bounds one encoded [from,to] pair with its comma.
func (l listShape) pairBytes() int64 { return 4 + 2*l.idDigits }

// tileBytes bounds one encoded DeviceTile with its comma.
func (l listShape) tileBytes() int64 {
	return 70 + l.idDigits + l.axes*(l.idDigits+1) + l.rangesBytes() + 2*l.rank*(l.dimDigits+1)
}

const fewerDevices = "use a smaller mesh or a coarser sharding"

// chargeTransfers bounds the transfers between before and after and charges them.
func (b *listBudget) chargeTransfers(field string, m *sharding.Mesh, shape []int64, before, after sharding.Sharding, fix string) error {
	if b.limit <= 0 {
		return nil
	}
	n := planner.TransferCount(m, shape, before, after)
	return b.charge(field, n*newListShape(m, shape).transferBytes(), strconv.FormatInt(n, 10)+" transfers", fix)
}

// transfersWithin charges and builds the transfers between before and after (from the
// nearest holders when nearest: planner.Step.NearestHolders), stopping with ctx's error
// once ctx is done.
func (b *listBudget) transfersWithin(ctx context.Context, field string, m *sharding.Mesh, shape []int64, bits int, before, after sharding.Sharding, nearest bool, fix string) ([]planner.Transfer, error) {
	if err := b.chargeTransfers(field, m, shape, before, after, fix); err != nil {
		return nil, err
	}
	return planner.TransfersContext(ctx, m, shape, bits, before, after, nearest)
}
