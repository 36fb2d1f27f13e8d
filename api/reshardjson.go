package api

import "sync"

// The reshard answer's encoder: encodeReshardJSON.

// reshard writes ReshardResponse, member by member in the struct's order.
func (e *jsonAppender) reshard(r *ReshardResponse) {
	e.b = append(e.b, '{')
	e.key("plan_id", true)
	e.str(r.PlanID)
	e.key("mesh", false)
	e.mesh(&r.Mesh)
	e.key("shape", false)
	ints(e, r.Shape)
	e.key("source", false)
	e.sharding(&r.Source)
	e.key("target", false)
	e.sharding(&r.Target)
	e.key("steps", false)
	list(e, r.Steps, e.step)
	e.key("summary", false)
	e.summary(&r.Summary)
	e.key("suggested_constraints", false)
	list(e, r.SuggestedConstraints, e.suggestion)
	e.xlaNotes(r.SuggestionNote, r.XLAWarning, r.XLAPath)
	e.optStr(`,"source_hlo":`, r.SourceHlo)
	e.optStr(`,"target_hlo":`, r.TargetHlo)
	if r.Tiles != nil {
		e.b = append(e.b, `,"tiles":`...)
		e.ref(r.Tiles)
	}
	if len(r.Transfers) > 0 {
		e.b = append(e.b, `,"transfers":`...)
		e.transfers(r.Transfers)
	}
	e.optStr(`,"diagram":`, r.Diagram)
	if r.ListsOmitted {
		e.b = append(e.b, `,"lists_omitted":true`...)
	}
	e.optStr(`,"note":`, r.Note)
	e.b = append(e.b, '}')
}

// encodeReshardJSON encodes r exactly as encodeJSON does (TestReshardJSONMatchesEncodingJSON),
// by hand (jsonAppender), without reflection over the per-device lists. What the
// appender cannot write (NaN) goes to encodeJSON.
func encodeReshardJSON(r *ReshardResponse) ([]byte, error) {
	bp := answerScratch.Get().(*[]byte)
	buf := (*bp)[:0]
	if hint := reshardJSONSizeHint(r); cap(buf) < hint {
		buf = make([]byte, 0, hint)
	}
	e := jsonAppender{b: buf}
	e.reshard(r)
	var out []byte
	if e.err == nil {
		// The plan memo keeps answers at their capacity: a copy of the answer's size.
		out = make([]byte, len(e.b))
		copy(out, e.b)
	}
	if cap(e.b) <= maxScratch {
		*bp = e.b[:0]
	}
	answerScratch.Put(bp)
	if e.err != nil {
		return encodeJSON(r)
	}
	return out, nil
}

// answerScratch holds the buffers answers are encoded into before they are copied to
// their size, up to maxScratch each.
var answerScratch = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxScratch is the largest buffer answerScratch keeps.
const maxScratch = 4 << 20

// reshardJSONSizeHint is an upper estimate of r's encoding from the lengths of its
// per-device lists, which are nearly all of a large answer: a scratch buffer smaller
// than it is replaced by one that big, so that the buffer is not grown (and copied)
// while the answer is written. A transfer is bounded by the digits its numbers can have (device ids
// below the device count, range bounds up to the largest dim, bytes up to the
// tensor's).
func reshardJSONSizeHint(r *ReshardResponse) int {
	rank := len(r.Shape)
	devices, maxDim, elems := int64(1), int64(1), int64(1)
	for _, a := range r.Mesh.Axes {
		devices *= max(int64(a.Size), 1)
	}
	for _, d := range r.Shape {
		maxDim = max(maxDim, d)
		elems = min(elems*max(d, 1), 1<<50)
	}
	ls := listShape{devices: devices, rank: int64(rank), idDigits: digits(devices), dimDigits: digits(maxDim)}
	// transferBytes allows 20 digits for bytes; an element has at most 64 bytes.
	transfer := int(ls.transferBytes() - 20 + digits(64*elems))
	n := 8<<10 + len(r.Transfers)*transfer
	if r.Tiles != nil {
		n += (len(r.Tiles.Source) + len(r.Tiles.Target)) * (96 + 4*rank*24) // device, coords, ranges, shapes, padding
	}
	for _, st := range r.Steps {
		n += 2<<10 + len(st.Transfers)*transfer + len(st.Pairs)*int(ls.pairBytes()) + len(st.PairRuns)*96 + len(st.TransferRuns)*(2*transfer+16)
	}
	return min(n, maxSizeHint)
}

// maxSizeHint caps the buffer an answer's encoding starts with: a larger answer grows
// from there rather than reserve memory it may not use.
const maxSizeHint = 16 << 20
