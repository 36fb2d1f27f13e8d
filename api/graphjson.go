package api

import (
	"slices"
	"sync/atomic"

	"github.com/shardplan/shardplan/internal/propagation"
)

// The graph answer's encoder. encodeGraphTensors writes the bytes encodeJSON writes
// (encoding/json with HTML escaping off, no trailing newline): by hand (jsonAppender)
// for what grows with the graph (a sharding and an explanation per tensor, the
// collectives and their steps), through encoding/json for the small or rare members (the
// graph's summary, stats, ops and opaque ops). graphjson_test.go checks the bytes
// against encodeJSON on the examples, transformer graphs and random strings, and that
// the hand-written types still have the fields the encoder knows.

// graphItemBytes is the size per item (answerItems) of the last graph answer encoded:
// the next answer's buffer is sized from it and its own number of items, so that a
// large answer is not copied at every growth of its buffer, and a small answer after a
// large one does not take the large one's buffer.
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

// maxWrittenShardings is how many written shardings an appender remembers.
const maxWrittenShardings = 8

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
