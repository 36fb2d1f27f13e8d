package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/shardplan/shardplan/internal/propagation"
)

// The graph answer's encoder. A 10k-op answer is megabytes of a few types (a sharding
// per tensor, an explanation per tensor, the collectives); encoding/json spends most of
// its time on reflection, on sorting the two big maps' keys through reflect values and
// on growing its buffer. appendGraphJSON writes the same bytes as encodeJSON
// (encoding/json with HTML escaping off, no trailing newline) by hand for those types
// and hands the small or rare members (the graph's summary, stats, ops and opaque ops,
// a reshard's tiles) to encoding/json itself. graphjson_test.go checks the bytes against
// encodeJSON on the examples, transformer graphs and random strings, and that the hand
// written types still have the fields this file knows.

// errNotFast is returned by the fast encoder for a value it does not write the way
// encoding/json does (a NaN or infinite float); encodeGraphJSON then encodes with
// encoding/json, whose error it returns.
var errNotFast = errors.New("api: value not handled by the fast graph encoder")

// graphItemBytes is the size per item (answerItems) of the last graph answer encoded:
// the next answer's buffer is sized from it and its own number of items, so that a
// large answer is not copied at every growth of its buffer (at 100k ops that growth,
// on fresh pages, cost a quarter of a second), and a small answer after a large one
// does not take the large one's buffer.
var graphItemBytes atomic.Int64

// defaultItemBytes is graphItemBytes before the first answer: about what a transformer
// layer's tensors, explanations and collectives take.
const defaultItemBytes = 256

// answerItems counts what a graph answer's size grows with: its tensors' shardings and
// explanations, its collectives and (include ops) its ops.
func answerItems(r *GraphResponse, ta *tensorAnswers) int64 {
	n := len(r.Collectives) + len(r.Ops) + len(r.Shardings) + len(r.Explain)
	if ta != nil {
		n += len(ta.shardings) + len(ta.explain)
	}
	return int64(max(n, 1))
}

// encodeGraphTensors encodes r exactly as encodeJSON does, with its Shardings and
// Explain maps as ta holds them (r's are then nil, planGraphTensors); ta nil: r's.
func encodeGraphTensors(r *GraphResponse, ta *tensorAnswers) ([]byte, error) {
	items := answerItems(r, ta)
	per := graphItemBytes.Load()
	if per == 0 {
		per = defaultItemBytes
	}
	size := max(per*items, 4<<10)
	e := jsonAppender{b: make([]byte, 0, size+size/8), tensors: ta}
	e.graph(r)
	if e.err != nil && ta != nil {
		return encodeJSON(ta.fill(r))
	}
	if e.err != nil {
		return encodeJSON(r)
	}
	graphItemBytes.Store(int64(len(e.b))/items + 1)
	return e.b, nil
}

// jsonAppender appends JSON to b; the first failure is kept in err (and later writes
// are harmless). With html, strings escape <, > and & as json.Marshal does; without, as
// encodeJSON does.
type jsonAppender struct {
	b    []byte
	err  error
	html bool
	// tensors, when set, replaces the graph answer's Shardings and Explain maps.
	tensors *tensorAnswers
	// written are the last shardings written (sharding), of nWritten in all.
	written  [maxWrittenShardings]writtenSharding
	nWritten int
}

// ref appends v as encoding/json encodes it (the members not written by hand).
func (e *jsonAppender) ref(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(e.html)
	if err := enc.Encode(v); err != nil {
		e.fail(err)
		return
	}
	e.b = append(e.b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func (e *jsonAppender) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// key appends a member name and its colon, preceded by a comma unless first.
func (e *jsonAppender) key(name string, first bool) {
	if !first {
		e.b = append(e.b, ',')
	}
	e.str(name)
	e.b = append(e.b, ':')
}

// optInt appends member (`,"name":`) and *n unless n is nil (an omitempty pointer).
func (e *jsonAppender) optInt(member string, n *int) {
	if n != nil {
		e.b = append(e.b, member...)
		e.int(int64(*n))
	}
}

// strAt and the other ...At methods append a member name (`,"name":`) and its value.
func (e *jsonAppender) strAt(member, s string) {
	e.b = append(e.b, member...)
	e.str(s)
}

// optStr appends member and s unless s is empty (an omitempty string).
func (e *jsonAppender) optStr(member, s string) {
	if s != "" {
		e.strAt(member, s)
	}
}

func (e *jsonAppender) intAt(member string, n int64) {
	e.b = append(e.b, member...)
	e.int(n)
}

func (e *jsonAppender) floatAt(member string, f float64) {
	e.b = append(e.b, member...)
	e.float(f)
}

func (e *jsonAppender) boolAt(member string, v bool) {
	e.b = append(e.b, member...)
	e.bool(v)
}

func (e *jsonAppender) strsAt(member string, ss []string) {
	e.b = append(e.b, member...)
	e.strs(ss)
}

func (e *jsonAppender) str(s string) { e.b = appendJSONString(e.b, s, e.html) }

func (e *jsonAppender) int(n int64) { e.b = appendInt(e.b, n) }

func (e *jsonAppender) bool(v bool) { e.b = strconv.AppendBool(e.b, v) }

// float appends f as encoding/json does (ES6 number formatting); NaN and infinities
// are errNotFast.
func (e *jsonAppender) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail(errNotFast)
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if n := len(e.b); format == 'e' && n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
		e.b[n-2] = e.b[n-1] // e-07 -> e-7
		e.b = e.b[:n-1]
	}
}

// list appends xs as an array (nil: null), each element written by elem.
func list[T any](e *jsonAppender, xs []T, elem func(*T)) {
	if xs == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		elem(&xs[i])
	}
	e.b = append(e.b, ']')
}

func (e *jsonAppender) strs(ss []string) { list(e, ss, func(s *string) { e.str(*s) }) }

// ints appends ns as an array (nil: null). It loops itself rather than through list's
// call of a closure per element: integer lists (shapes, pairs, transfer ranges) are
// most of a large answer.
func ints[T int | int64](e *jsonAppender, ns []T) {
	if ns == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i, n := range ns {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = appendInt(e.b, int64(n))
	}
	e.b = append(e.b, ']')
}

// twoDigits holds "00" to "99", two bytes each.
const twoDigits = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendInt appends n in decimal, as strconv.AppendInt(dst, n, 10) does. Numbers below
// 10,000 (device ids, dims, range bounds of most answers) are written from twoDigits
// without strconv's general loop.
func appendInt(dst []byte, n int64) []byte {
	switch {
	case n < 0 || n >= 10000:
		return strconv.AppendInt(dst, n, 10)
	case n < 10:
		return append(dst, byte('0'+n))
	case n < 100:
		return append(dst, twoDigits[2*n], twoDigits[2*n+1])
	case n < 1000:
		hi, lo := n/100, n%100
		return append(dst, byte('0'+hi), twoDigits[2*lo], twoDigits[2*lo+1])
	}
	hi, lo := n/100, n%100
	return append(dst, twoDigits[2*hi], twoDigits[2*hi+1], twoDigits[2*lo], twoDigits[2*lo+1])
}

// graph writes GraphResponse (members in field order, omitempty as tagged).
func (e *jsonAppender) graph(r *GraphResponse) {
	e.b = append(e.b, '{')
	e.key("plan_id", true)
	e.str(r.PlanID)
	e.key("mesh", false)
	e.mesh(&r.Mesh)
	e.key("shardings", false)
	if ta := e.tensors; ta != nil {
		orderedMap(e, ta.shardingIDs, ta.shardings, e.sharding)
	} else {
		sortedMap(e, r.Shardings, func(s ShardingJSON) { e.sharding(&s) })
	}
	e.key("collectives", false)
	list(e, r.Collectives, e.collective)
	e.key("summary", false)
	e.ref(r.Summary)
	e.key("explain", false)
	if ta := e.tensors; ta != nil {
		orderedMap(e, ta.explainIDs, ta.explain, func(os *[]propagation.Origin) { e.origins(*os) })
	} else {
		sortedMap(e, r.Explain, e.explanation)
	}
	e.key("refined", false)
	e.strs(r.Refined)
	if len(r.Ops) > 0 {
		e.key("ops", false)
		e.ref(r.Ops)
	}
	e.key("stats", false)
	e.ref(r.Stats)
	if r.ListsOmitted {
		e.key("lists_omitted", false)
		e.bool(true)
	}
	if r.Note != "" {
		e.key("note", false)
		e.str(r.Note)
	}
	if len(r.OpaqueOps) > 0 {
		e.key("opaque_ops", false)
		e.ref(r.OpaqueOps)
	}
	e.b = append(e.b, '}')
}

// sortedMap appends m as an object (nil: null) with its keys in the order encoding/json
// gives string keys (byte order), each value written by val.
func sortedMap[V any](e *jsonAppender, m map[string]V, val func(V)) {
	if m == nil {
		e.b = append(e.b, "null"...)
		return
	}
	var buf [8]string // the keys of an op's attributes, without allocating
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.b = append(e.b, '{')
	for i, k := range keys {
		e.key(k, i == 0)
		val(m[k])
	}
	e.b = append(e.b, '}')
}

// orderedMap appends the object of keys (distinct, in byte order) and their values, as
// sortedMap appends the map of them.
func orderedMap[V any](e *jsonAppender, keys []string, vals []V, val func(*V)) {
	e.b = append(e.b, '{')
	for i, k := range keys {
		e.key(k, i == 0)
		val(&vals[i])
	}
	e.b = append(e.b, '}')
}

func (e *jsonAppender) explanation(es []ExplainEntry) {
	list(e, es, func(x *ExplainEntry) {
		e.intAt(`{"dim":`, int64(x.Dim))
		e.strsAt(`,"axes":`, x.Axes)
		e.strAt(`,"from":`, x.From)
		e.b = append(e.b, '}')
	})
}

// origins writes os as explanation writes explainEntries(os), without building those.
func (e *jsonAppender) origins(os []propagation.Origin) {
	e.b = append(e.b, '[')
	for i := range os {
		o := &os[i]
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.intAt(`{"dim":`, int64(o.Dim))
		e.b = append(e.b, `,"axes":[`...)
		for k, a := range o.Axes {
			if k > 0 {
				e.b = append(e.b, ',')
			}
			e.str(a.String())
		}
		e.b = append(e.b, ']')
		e.strAt(`,"from":`, o.From)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ']')
}

// sharding writes ShardingJSON. A sharding that is one of the last few written (the same
// rendering: shardingWriter gives every step and tensor with a sharding the same slices
// and strings) is copied from where it was written.
func (e *jsonAppender) sharding(s *ShardingJSON) {
	for i := range min(e.nWritten, maxWrittenShardings) {
		if w := &e.written[i]; sameRendering(&w.s, s) {
			e.b = append(e.b, e.b[w.start:w.end]...)
			return
		}
	}
	start := len(e.b)
	e.writeSharding(s)
	e.written[e.nWritten%maxWrittenShardings] = writtenSharding{s: *s, start: start, end: len(e.b)}
	e.nWritten++
}

// writtenSharding is a sharding an appender wrote, at b[start:end].
type writtenSharding struct {
	s          ShardingJSON
	start, end int
}

// maxWrittenShardings is how many written shardings an appender remembers.
const maxWrittenShardings = 8

// sameRendering reports whether a and b are the same rendering: the same dims and lists
// (not only equal ones: the same backing arrays) and equal texts. It never reports two
// different encodings as the same; equal renderings built apart it does not recognize.
func sameRendering(a, b *ShardingJSON) bool {
	return sameSlice(a.Dims, b.Dims) && sameSlice(a.Replicated, b.Replicated) && sameSlice(a.Unreduced, b.Unreduced) &&
		a.Text == b.Text && a.Hlo == b.Hlo && a.PartitionSpec == b.PartitionSpec
}

// sameSlice reports whether a and b have the same length and, when not empty, the same
// first element (the same backing array): the same elements. An empty slice is the same
// as another only when both are nil or both are not (they encode as null and []).
func sameSlice[T any](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return (a == nil) == (b == nil)
	}
	return &a[0] == &b[0]
}

// writeSharding writes ShardingJSON itself.
func (e *jsonAppender) writeSharding(s *ShardingJSON) {
	e.b = append(e.b, `{"dims":`...)
	list(e, s.Dims, func(d *DimShardingJSON) {
		e.strsAt(`{"axes":`, d.Axes)
		if d.Open {
			e.b = append(e.b, `,"open":true`...)
		}
		e.optInt(`,"priority":`, d.Priority)
		e.b = append(e.b, '}')
	})
	if len(s.Replicated) > 0 {
		e.strsAt(`,"replicated":`, s.Replicated)
	}
	if len(s.Unreduced) > 0 {
		e.strsAt(`,"unreduced":`, s.Unreduced)
	}
	e.strAt(`,"text":`, s.Text)
	e.strAt(`,"hlo":`, s.Hlo)
	e.optStr(`,"partition_spec":`, s.PartitionSpec)
	e.b = append(e.b, '}')
}

// collective writes GraphCollective.
func (e *jsonAppender) collective(c *GraphCollective) {
	e.strAt(`{"op_name":`, c.OpName)
	e.strAt(`,"tensor":`, c.Tensor)
	e.strAt(`,"kind":`, c.Kind)
	e.optStr(`,"reduction":`, c.Reduction)
	if len(c.MeshAxes) > 0 {
		e.strsAt(`,"mesh_axes":`, c.MeshAxes)
	}
	e.optInt(`,"dim":`, c.Dim)
	e.b = append(e.b, `,"shape":`...)
	ints(e, c.Shape)
	if c.Plan != nil {
		e.b = append(e.b, `,"plan":`...)
		e.plan(c.Plan)
	}
	if len(c.Steps) > 0 {
		e.b = append(e.b, `,"steps":`...)
		list(e, c.Steps, e.step)
	}
	e.floatAt(`,"time_us":`, c.TimeUS)
	e.intAt(`,"bytes_per_device":`, c.BytesPerDevice)
	e.boolAt(`,"full_rematerialization":`, c.FullRematerialization)
	if c.XLAFallback {
		e.b = append(e.b, `,"xla_fallback":true`...)
	}
	e.b = append(e.b, '}')
}

// plan writes GraphPlan.
func (e *jsonAppender) plan(p *GraphPlan) {
	e.b = append(e.b, `{"source":`...)
	e.sharding(&p.Source)
	e.b = append(e.b, `,"target":`...)
	e.sharding(&p.Target)
	e.b = append(e.b, `,"steps":`...)
	list(e, p.Steps, e.step)
	e.b = append(e.b, `,"summary":`...)
	e.summary(&p.Summary)
	if len(p.SuggestedConstraints) > 0 {
		e.b = append(e.b, `,"suggested_constraints":`...)
		list(e, p.SuggestedConstraints, e.suggestion)
	}
	e.xlaNotes(p.SuggestionNote, p.XLAWarning, p.XLAPath)
	e.b = append(e.b, '}')
}

// xlaNotes writes the omitempty members strategy xla adds to a plan: suggestion_note,
// xla_warning, xla_path.
func (e *jsonAppender) xlaNotes(note, warning string, path []string) {
	e.optStr(`,"suggestion_note":`, note)
	e.optStr(`,"xla_warning":`, warning)
	if len(path) > 0 {
		e.strsAt(`,"xla_path":`, path)
	}
}

// summary writes SummaryJSON.
func (e *jsonAppender) summary(s *SummaryJSON) {
	e.strAt(`{"strategy":`, s.Strategy)
	e.strAt(`,"cost_model":`, s.CostModel)
	e.intAt(`,"collectives":`, int64(s.Collectives))
	e.floatAt(`,"time_us":`, s.TimeUS)
	e.intAt(`,"bytes_per_device":`, s.BytesPerDevice)
	e.intAt(`,"lower_bound_bytes_per_device":`, s.LowerBoundBytesPerDevice)
	e.floatAt(`,"efficiency":`, s.Efficiency)
	e.floatAt(`,"time_lower_bound_us":`, s.TimeLowerBoundUS)
	e.floatAt(`,"time_efficiency":`, s.TimeEfficiency)
	e.intAt(`,"peak_bytes_per_device":`, s.PeakBytesPerDevice)
	e.boolAt(`,"full_rematerialization":`, s.FullRematerialization)
	if s.XLAFallback {
		e.b = append(e.b, `,"xla_fallback":true`...)
	}
	if s.Optimality != "" {
		e.strAt(`,"optimality":`, s.Optimality)
	}
	if s.OptimalityGapUS != 0 {
		e.floatAt(`,"optimality_gap_us":`, s.OptimalityGapUS)
	}
	e.intAt(`,"search_expansions":`, int64(s.SearchExpansions))
	if len(s.Candidates) > 0 {
		e.b = append(e.b, `,"candidates":`...)
		list(e, s.Candidates, func(c *Candidate) {
			e.strAt(`{"name":`, c.Name)
			e.intAt(`,"steps":`, int64(c.Steps))
			e.floatAt(`,"time_us":`, c.TimeUS)
			e.intAt(`,"bytes_per_device":`, c.BytesPerDevice)
			e.boolAt(`,"chosen":`, c.Chosen)
			e.b = append(e.b, '}')
		})
	}
	e.b = append(e.b, '}')
}

// step writes StepJSON; the per-device lists go through encoding/json.
func (e *jsonAppender) step(s *StepJSON) {
	e.strAt(`{"op":`, s.Op)
	if len(s.Dims) > 0 {
		e.b = append(e.b, `,"dims":`...)
		ints(e, s.Dims)
	}
	e.optInt(`,"dim":`, s.Dim)
	e.optInt(`,"split_dim":`, s.SplitDim)
	e.optInt(`,"concat_dim":`, s.ConcatDim)
	e.strsAt(`,"mesh_axes":`, s.MeshAxes)
	if len(s.Pairs) > 0 {
		e.b = append(e.b, `,"pairs":`...)
		e.pairs(s.Pairs)
	}
	if len(s.Transfers) > 0 {
		e.b = append(e.b, `,"transfers":`...)
		e.transfers(s.Transfers)
	}
	if len(s.PairRuns) > 0 {
		e.b = append(e.b, `,"pair_runs":`...)
		list(e, s.PairRuns, func(r *PairRun) {
			e.intAt(`{"from":`, int64(r.From))
			e.intAt(`,"to":`, int64(r.To))
			e.intAt(`,"from_step":`, int64(r.FromStep))
			e.intAt(`,"to_step":`, int64(r.ToStep))
			e.intAt(`,"count":`, int64(r.Count))
			e.b = append(e.b, '}')
		})
	}
	if len(s.TransferRuns) > 0 {
		e.b = append(e.b, `,"transfer_runs":`...)
		list(e, s.TransferRuns, func(r *TransferRun) {
			e.b = append(e.b, `{"first":`...)
			e.transfer(&r.First)
			e.b = append(e.b, `,"step":`...)
			e.transfer(&r.Step)
			e.intAt(`,"count":`, int64(r.Count))
			e.b = append(e.b, '}')
		})
	}
	e.b = append(e.b, `,"before":`...)
	e.sharding(&s.Before)
	e.b = append(e.b, `,"after":`...)
	e.sharding(&s.After)
	e.b = append(e.b, `,"local_shape_before":`...)
	ints(e, s.LocalShapeBefore)
	e.b = append(e.b, `,"local_shape_after":`...)
	ints(e, s.LocalShapeAfter)
	e.intAt(`,"group_size":`, int64(s.GroupSize))
	e.intAt(`,"group_count":`, int64(s.GroupCount))
	e.intAt(`,"bytes_per_device":`, s.BytesPerDevice)
	e.optStr(`,"link":`, s.Link)
	e.floatAt(`,"time_us":`, s.TimeUS)
	e.floatAt(`,"latency_us":`, s.LatencyUS)
	e.floatAt(`,"bandwidth_us":`, s.BandwidthUS)
	e.b = append(e.b, '}')
}

// pairs writes a non-nil list of collective_permute pairs.
func (e *jsonAppender) pairs(ps [][2]int) {
	b := append(e.b, '[')
	for i := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendInt(b, int64(ps[i][0]))
		b = append(b, ',')
		b = appendInt(b, int64(ps[i][1]))
		b = append(b, ']')
	}
	e.b = append(b, ']')
}

// transfers writes a non-nil list of Transfer.
func (e *jsonAppender) transfers(ts []Transfer) {
	e.b = append(e.b, '[')
	for i := range ts {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.transfer(&ts[i])
	}
	e.b = append(e.b, ']')
}

// transfer writes Transfer: the lists of an all_to_all_v step are most of a
// large reshard answer (thousands of transfers on 256 devices), so it appends to a
// local slice and writes every number with appendInt.
func (e *jsonAppender) transfer(t *Transfer) {
	b := append(e.b, `{"from":`...)
	b = appendInt(b, int64(t.From))
	b = append(b, `,"to":`...)
	b = appendInt(b, int64(t.To))
	b = append(b, `,"ranges":`...)
	b = appendRanges(b, t.Ranges)
	b = append(b, `,"source_local":`...)
	b = appendRanges(b, t.SourceLocal)
	b = append(b, `,"target_local":`...)
	b = appendRanges(b, t.TargetLocal)
	b = append(b, `,"bytes":`...)
	b = appendInt(b, t.Bytes)
	e.b = append(b, '}')
}

// appendRanges appends r as encoding/json does: [[lo,hi],...], or null when nil.
func appendRanges(b []byte, r [][2]int64) []byte {
	if r == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range r {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendInt(b, r[i][0])
		b = append(b, ',')
		b = appendInt(b, r[i][1])
		b = append(b, ']')
	}
	return append(b, ']')
}

// mesh writes MeshObject.
func (e *jsonAppender) mesh(m *MeshObject) {
	e.b = append(e.b, '{')
	if m.Name != "" {
		e.strAt(`"name":`, m.Name)
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, `"axes":`...)
	list(e, m.Axes, func(a *MeshAxis) {
		e.strAt(`{"name":`, a.Name)
		e.intAt(`,"size":`, int64(a.Size))
		e.b = append(e.b, '}')
	})
	if len(m.DeviceIDs) > 0 {
		e.b = append(e.b, `,"device_ids":`...)
		ints(e, m.DeviceIDs)
	}
	e.b = append(e.b, '}')
}

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

// suggestion writes Suggestion.
func (e *jsonAppender) suggestion(sg *Suggestion) {
	e.b = append(e.b, '{')
	if sg.PartitionSpec != "" {
		e.strAt(`"partition_spec":`, sg.PartitionSpec)
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, `"sharding":`...)
	e.sharding(&sg.Sharding)
	e.b = append(e.b, '}')
}

// encodeReshardJSON encodes r exactly as encodeJSON does (TestReshardJSONMatchesEncodingJSON),
// by hand: encoding/json's reflection over the per-device lists was most of a large
// answer's encoding. What the appender cannot write (NaN) goes to encodeJSON.
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
// their size, up to maxScratch each. The copy costs less than sizing the buffer
// exactly by counting every transfer's digits first, which took a tenth of render and
// encode on testgen.RandomSet.
var answerScratch = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxScratch is the largest buffer answerScratch keeps.
const maxScratch = 4 << 20

// reshardJSONSizeHint is an upper estimate of r's encoding from the lengths of its
// per-device lists, which are nearly all of a large answer: a scratch buffer smaller
// than it is replaced by one that big, which saves the copies of its growth (a 3 MB
// answer grown from 4 KiB copied about 12 MB, a sixth of the render and encode of
// testgen.RandomSet). A transfer is bounded by the digits its numbers can have (device ids
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

// appendJSONString appends s as a JSON string the way encoding/json does: `"` and `\`
// escaped, \b \f \n \r \t by name, other control bytes as \u00XX, invalid UTF-8 bytes
// as \ufffd, U+2028 and U+2029 as \u2028 and \u2029; with html (json.Marshal's
// default) <, > and & as \u003c, \u003e and \u0026; everything else as is.
func appendJSONString(dst []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!html || b != '<' && b != '>' && b != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
