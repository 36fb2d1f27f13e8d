package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/stablehlo"
)

// GraphRequest to propagation's graph: every value checked and converted explicitly,
// every error a field error naming its wire path; a module imported (importModule).
// graphKey hashes the graph so read into the request's plan id.

// DefaultMaxGraphDepth is how deep while ops may nest in a graph DecodeGraph reads.
const DefaultMaxGraphDepth = 32

// DepthError is toGraph's error for while ops nested deeper than its limit.
type DepthError struct {
	Field string // wire path of the first while op past the limit
	Limit int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("%s: while ops nest deeper than %d", e.Field, e.Limit)
}

// DecodeGraph reads the graph part of a POST /v1/graph body (tensors, ops, inputs,
// outputs, options) against mesh m, for callers outside the HTTP path (tests, tools).
// It takes the body the service takes; errors are field errors (or a *Problem for a
// body that is not JSON) naming the wire path.
func DecodeGraph(body []byte, m *sharding.Mesh) (*propagation.Graph, propagation.Options, error) {
	req, err := readGraphRequest(body)
	if err != nil {
		return nil, propagation.DefaultOptions(), err
	}
	return req.toGraph(m, DefaultMaxGraphDepth)
}

// toGraph converts the graph part against mesh m. Annotations are parsed with
// sharding.Parse (any input form). Ops inside more than maxDepth nested while regions
// are a *DepthError. Errors list the tensors in body order, then the ops, then options.
func (req *GraphRequest) toGraph(m *sharding.Mesh, maxDepth int) (*propagation.Graph, propagation.Options, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxGraphDepth
	}
	w := &req.wire
	opts := propagation.DefaultOptions()
	if w.err != nil {
		return nil, opts, w.err
	}
	g := &propagation.Graph{Tensors: make(map[string]*propagation.Tensor, len(w.order)), Inputs: req.Inputs, Outputs: req.Outputs}
	var errs fielderr.Errors
	switch {
	case !w.tensors || w.tensorsNull:
		errs = append(errs, fielderr.New("tensors", "is required: an object of tensor id -> {shape, dtype, sharding}"))
	case w.tensorsNotObject:
		errs = append(errs, fielderr.New("tensors", "must be an object of tensor id -> {shape, dtype, sharding}"))
	}
	anns := annotations{m: m}
	values := make([]propagation.Tensor, len(w.order)) // the tensors, one allocation for all
	for i, id := range w.order {
		if id == "" {
			errs = append(errs, fielderr.New("tensors", "a tensor id must not be empty"))
			continue
		}
		wt := req.Tensors[id]
		t := &values[i]
		if err := wt.toTensor(t, &anns, id); err != nil {
			errs = appendFieldErrors(errs, err)
			continue
		}
		g.Tensors[id] = t
	}
	if len(req.Ops) > 0 {
		g.Ops = make([]propagation.Op, 0, len(req.Ops))
	}
	for i := range req.Ops {
		op, err := req.Ops[i].toOp("ops", i, maxDepth)
		if de, ok := err.(*DepthError); ok {
			de.Limit = maxDepth
			return nil, opts, de
		}
		if err != nil {
			errs = appendFieldErrors(errs, err)
			continue
		}
		g.Ops = append(g.Ops, op)
	}
	if len(g.Ops) == 0 {
		g.Ops = nil
	}
	if req.Options != nil {
		var err error
		if opts, err = req.Options.toOptions(); err != nil {
			errs = appendFieldErrors(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, opts, errs
	}
	return g, opts, nil
}

// moduleOptions converts options for a module request, which reads them strictly.
func (req *GraphRequest) moduleOptions() (propagation.Options, error) {
	if req.wire.optionsErr != nil {
		return propagation.DefaultOptions(), req.wire.optionsErr
	}
	if req.Options == nil {
		return propagation.DefaultOptions(), nil
	}
	return req.Options.toOptions()
}

func (o *GraphOptions) toOptions() (propagation.Options, error) {
	opts := propagation.DefaultOptions()
	if c := o.ConflictResolution; c != nil {
		switch *c {
		case propagation.Aggressive, propagation.Basic, propagation.BasicThenAggressive:
			opts.ConflictResolution = *c
		default:
			return opts, fielderr.New("options.conflict_resolution", "must be %q, %q or %q, not %q",
				propagation.Aggressive, propagation.Basic, propagation.BasicThenAggressive, *c)
		}
	}
	if p := o.OpPriority; p != nil {
		opts.OpPriority = *p
	}
	return opts, nil
}

// toTensor converts the tensor with the given id into t, parsing its annotation through
// anns.
func (wt *GraphTensor) toTensor(t *propagation.Tensor, anns *annotations, id string) error {
	// field is the tensor's path, built only for an error.
	field := func() string { return "tensors." + id }
	if wt.err != nil {
		return under(field(), wt.err)
	}
	if wt.Tensor != "" {
		if wt.Shape != nil || wt.DType != "" {
			return fielderr.New(field()+".tensor", "give tensor, or shape with dtype, not both")
		}
		shape, dtype, err := sharding.ParseTensorType(wt.Tensor, field()+".tensor")
		if err != nil {
			return err
		}
		if shape == nil {
			shape = []int64{}
		}
		wt.Shape, wt.DType = shape, dtype
	}
	if wt.Shape == nil {
		return fielderr.New(field()+".shape", "is required: an array of dim sizes ([] for a scalar)")
	}
	for d, n := range wt.Shape {
		if n < 0 {
			return fielderr.New(field()+".shape["+strconv.Itoa(d)+"]", "dim size %d is negative", n)
		}
	}
	*t = propagation.Tensor{Shape: wt.Shape, ElemBits: 32}
	if wt.DType != "" {
		bits, ok := sharding.DTypeBits(wt.DType)
		if !ok {
			return fielderr.New(field()+".dtype", "unknown dtype %q; known: %s", wt.DType, sharding.KnownDTypes())
		}
		t.ElemBits = bits
	}
	if wt.Sharding != nil {
		sh, err := anns.parse(wt.Sharding, wt.Shape, id)
		if err != nil {
			return err
		}
		t.Sharding = sh
	}
	return nil
}

// annotations parses the annotations of one graph on mesh m. Tensors with the same
// annotation bytes and shape (the weights of every layer of a model) share one parse:
// a graph's tensors are only read once decoded, by the plan id and propagation.
type annotations struct {
	m   *sharding.Mesh
	got map[string]*sharding.Sharding // by key
	key []byte                        // scratch: the annotation's length and bytes, then the shape
}

// parse is sharding.Parse of raw for tensor id of the given shape.
func (a *annotations) parse(raw json.RawMessage, shape []int64, id string) (*sharding.Sharding, error) {
	key := append(binary.AppendUvarint(a.key[:0], uint64(len(raw))), raw...)
	for _, n := range shape {
		key = binary.AppendVarint(key, n)
	}
	a.key = key
	if sh, ok := a.got[string(key)]; ok {
		return sh, nil
	}
	sh, err := sharding.Parse(raw, a.m, shape, "tensors."+id+".sharding")
	if err != nil {
		return nil, err
	}
	if a.got == nil {
		a.got = map[string]*sharding.Sharding{}
	}
	a.got[string(key)] = &sh
	return &sh, nil
}

// under moves fe, whose path is relative to the value at field, under field.
func under(field string, fe *fielderr.FieldError) *fielderr.FieldError {
	if fe.Field != "" {
		field += "." + fe.Field
	}
	return &fielderr.FieldError{Field: field, Message: fe.Message}
}

// toOp converts op i of the op list at path list; depth is how many more while levels
// may nest inside it.
func (o *GraphOp) toOp(list string, i, depth int) (propagation.Op, error) {
	// field is the op's path, built only for an error or a region (most ops need none).
	field := func() string { return list + "[" + strconv.Itoa(i) + "]" }
	if o.err != nil {
		return propagation.Op{}, under(field(), o.err)
	}
	if o.Op == "" {
		return propagation.Op{}, fielderr.New(field()+".op", "is required; supported ops: %s", strings.Join(propagation.SupportedOps(), ", "))
	}
	if o.attrsBad {
		return propagation.Op{}, fielderr.New(field()+".attrs", "must be an object of StableHLO attributes")
	}
	op := propagation.Op{Name: o.Name, Kind: o.Op, Operands: o.Operands, Results: o.Results, Attrs: o.Attrs, Rule: o.Rule}
	var err error
	if o.Cond != nil {
		f := field()
		if op.Cond, err = o.Cond.toRegion(f, f+".cond", depth); err != nil {
			return propagation.Op{}, err
		}
	}
	if o.Body != nil {
		f := field()
		if op.Body, err = o.Body.toRegion(f, f+".body", depth); err != nil {
			return propagation.Op{}, err
		}
	}
	return op, nil
}

func (g *GraphRegion) toRegion(opField, field string, depth int) (*propagation.Region, error) {
	if g == nil {
		return nil, nil
	}
	r := &propagation.Region{Params: g.Params, Returns: g.Returns}
	if len(g.Ops) > 0 && depth <= 0 {
		return nil, &DepthError{Field: opField} // toGraph sets Limit
	}
	for i := range g.Ops {
		op, err := g.Ops[i].toOp(field+".ops", i, depth-1)
		if err != nil {
			return nil, err
		}
		r.Ops = append(r.Ops, op)
	}
	return r, nil
}

// checkGraphPresence is the request-level rule of the graph fields: mesh and tensors
// are required without module; tensors, ops, inputs and outputs are absent with it. A
// field given as null counts as given.
func (req *GraphRequest) checkGraphPresence() []*sharding.FieldError {
	w := &req.wire
	withModule := req.Module != ""
	var out []*sharding.FieldError
	if req.Mesh == nil && !withModule {
		out = append(out, sharding.Fieldf("mesh", "is required when module is absent"))
	}
	for _, f := range []struct {
		name     string
		given    bool
		required bool
	}{{"tensors", w.tensors, true}, {"ops", w.ops, false}, {"inputs", w.inputs, false}, {"outputs", w.outputs, false}} {
		switch {
		case f.required && !f.given && !withModule:
			out = append(out, sharding.Fieldf(f.name, "is required when module is absent"))
		case f.given && withModule:
			out = append(out, sharding.Fieldf(f.name, "must be absent when module is given; give one of them"))
		}
	}
	return out
}

// importModule reads in.req.Module into in's mesh, graph and options, or returns ctx's
// error once ctx is done.
func (s *Server) importModule(ctx context.Context, in *graphInput) error {
	var reqMesh *sharding.Mesh
	if raw := bytes.TrimSpace(in.req.Mesh); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		m, err := parseMesh(in.req.Mesh, "mesh", s.limits)
		if err != nil {
			return err
		}
		reqMesh = m
	}
	if looksLikeHLO(in.req.Module) {
		return sharding.Fieldf("module", "line 1, column 1: this is a compiled HLO module (HloModule ...), not StableHLO: post it to /v1/audit as \"hlo_module\" or with Content-Type %s", hloMediaType)
	}
	imp, err := stablehlo.Read(ctx, in.req.Module, stablehlo.Options{Function: in.req.Function, Mesh: reqMesh, Limits: stablehlo.Limits{
		MaxDepth: s.limits.MaxModuleDepth, MaxOps: s.limits.MaxGraphOps, MaxTensors: s.limits.MaxGraphTensors,
		MaxDevices: s.limits.MaxDevices, MaxMeshAxes: s.limits.MaxMeshAxes,
	}})
	if err != nil {
		return err
	}
	opts, err := in.req.moduleOptions()
	if err != nil {
		return err
	}
	in.mesh, in.graph, in.opts, in.imp = imp.Mesh, imp.Graph, opts, imp
	return nil
}

// locate makes the errors of propagating or planning an imported module name its line
// and column.
func (in *graphInput) locate(err error) error {
	if in.imp == nil || err == nil {
		return err
	}
	return in.imp.Locate(err)
}

// looksLikeHLO reports whether text starts as a compiled HLO module.
func looksLikeHLO(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "HloModule ")
}

// graphKey hashes the canonical graph request: annotations by their canonical text, ops
// as decoded, so equal graphs in any input form share a plan id. The hashed bytes are
// json.Marshal's (a head array, a [id, shape, elem bits, annotation] array per tensor in
// id order, then the ops as propagation.Op marshals), written by hand for the tensors and
// ops; graphkey_test.go checks them against json.Marshal.
func graphKey(in *graphInput) (string, error) {
	h := sha256.New()
	model := modelFingerprint(in.model)
	inc := slices.Clone(in.req.Include)
	slices.Sort(inc)
	inc = slices.Compact(inc)
	parts := []any{planner.Version, "graph", in.mesh.String(), in.mesh.Name, in.mesh.DeviceIDs,
		model, string(in.strategy), inc, in.opts, in.graph.Inputs, in.graph.Outputs}
	if in.remat && in.strategy == planner.Optimal {
		// Left out at the default (as is effort_fast): a request that does not set it
		// hashes as if the key had no such part.
		parts = append(parts, "allow_full_rematerialization")
	}
	if in.strategy == planner.Optimal {
		switch in.effort {
		case planner.EffortFast:
			parts = append(parts, "effort_fast")
		case planner.EffortExhaustive:
			parts = append(parts, "effort_exhaustive")
		}
		if ms := in.req.PlanningBudgetMS; ms > 0 {
			parts = append(parts, "planning_budget_ms", ms)
		}
	}
	head, _ := json.Marshal(parts)
	h.Write(head)
	if in.imp != nil {
		// The answer lists the opaque ops with their positions in the module text.
		opaque, _ := json.Marshal(in.imp.Opaque)
		h.Write(opaque)
	}
	e := jsonAppender{html: true, b: make([]byte, 0, 64<<10)}
	flush := func() {
		if len(e.b) >= 32<<10 {
			h.Write(e.b)
			e.b = e.b[:0]
		}
	}
	// Tensors with one annotation share its value (annotations.parse): print it once.
	bodies := map[*sharding.Sharding]string{}
	for _, id := range in.tensorIDs() {
		t := in.graph.Tensors[id]
		ann := "-"
		if t.Sharding != nil {
			b, ok := bodies[t.Sharding]
			if !ok {
				b = t.Sharding.Body()
				bodies[t.Sharding] = b
			}
			ann = b
		}
		e.tensorLine(id, t.Shape, t.ElemBits, ann)
		flush()
	}
	// Ops as decoded: attribute maps are written with sorted keys, so key order and
	// whitespace in the request do not matter.
	if in.graph.Ops == nil {
		e.b = append(e.b, "null"...)
	}
	for i := range in.graph.Ops {
		sep := byte(',')
		if i == 0 {
			sep = '['
		}
		e.b = append(e.b, sep)
		e.op(&in.graph.Ops[i])
		flush()
	}
	if len(in.graph.Ops) > 0 {
		e.b = append(e.b, ']')
	}
	if e.err != nil {
		return "", e.err
	}
	h.Write(e.b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tensorLine appends json.Marshal([]any{id, shape, elemBits, ann}).
func (e *jsonAppender) tensorLine(id string, shape []int64, elemBits int, ann string) {
	e.b = append(e.b, '[')
	e.str(id)
	e.b = append(e.b, ',')
	ints(e, shape)
	e.intAt(",", int64(elemBits))
	e.b = append(e.b, ',')
	e.str(ann)
	e.b = append(e.b, ']')
}

// op appends json.Marshal(o) (propagation.Op has no json tags: members by field name).
func (e *jsonAppender) op(o *propagation.Op) {
	e.strAt(`{"Name":`, o.Name)
	e.strAt(`,"Kind":`, o.Kind)
	e.strsAt(`,"Operands":`, o.Operands)
	e.strsAt(`,"Results":`, o.Results)
	e.b = append(e.b, `,"Attrs":`...)
	e.value(o.Attrs)
	e.strAt(`,"Rule":`, o.Rule)
	e.region(`,"Cond":`, o.Cond)
	e.region(`,"Body":`, o.Body)
	e.b = append(e.b, '}')
}

func (e *jsonAppender) region(member string, r *propagation.Region) {
	e.b = append(e.b, member...)
	if r == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.strsAt(`{"Params":`, r.Params)
	e.b = append(e.b, `,"Ops":`...)
	list(e, r.Ops, e.op)
	e.strsAt(`,"Returns":`, r.Returns)
	e.b = append(e.b, '}')
}

// value appends an attribute value as encoding/json does: the decoded JSON types and
// integer lists by hand, anything else (and NaN, and a number literal that is not
// one) through encoding/json itself.
func (e *jsonAppender) value(v any) {
	switch x := v.(type) {
	case nil:
		e.b = append(e.b, "null"...)
	case string:
		e.str(x)
	case bool:
		e.bool(x)
	case json.Number:
		if !isJSONNumber(string(x)) {
			e.ref(x)
			return
		}
		e.b = append(e.b, x...)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			e.ref(x)
			return
		}
		e.float(x)
	case int:
		e.int(int64(x))
	case int64:
		e.int(x)
	case []int:
		ints(e, x)
	case []int64:
		ints(e, x)
	case []any:
		list(e, x, func(v *any) { e.value(*v) })
	case map[string]any:
		sortedMap(e, x, e.value)
	default:
		e.ref(v)
	}
}

// isJSONNumber reports whether s is a JSON number literal (-?int frac? exp?).
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// graphInput is a decoded, validated graph request.
type graphInput struct {
	req      *GraphRequest
	mesh     *sharding.Mesh
	graph    *propagation.Graph
	opts     propagation.Options
	model    cost.Model
	strategy planner.Strategy
	include  map[string]bool
	remat    bool // full_rematerialization: allow
	effort   planner.Effort
	key      string
	// imp is the imported module (module requests only).
	imp *stablehlo.Import
	// ids holds graph's tensor ids sorted, once tensorIDs has been called.
	ids []string
}

// tensorIDs is the sorted ids of in.graph's tensors, sorted once per request: the plan
// id hashes the tensors in this order and the answer lists them in it.
func (in *graphInput) tensorIDs() []string {
	if in.ids == nil {
		in.ids = slices.Sorted(maps.Keys(in.graph.Tensors))
	}
	return in.ids
}

// prepareGraph reads a graph body (or takes req, a request already read from body, when
// not nil), validates the request and parses its mesh, graph (or module), cost model
// and options. Importing a module stops with ctx's error once ctx is done.
func (s *Server) prepareGraph(ctx context.Context, body []byte, req *GraphRequest) (*graphInput, error) {
	if req == nil {
		var err error
		if req, err = readGraphRequest(body); err != nil {
			return nil, err
		}
	}
	// Refuse too many tensors before their shardings are parsed.
	if n, most := len(req.wire.order), s.limits.MaxGraphTensors; most > 0 && n > most {
		return nil, tooManyTensors(n, most)
	}
	if err := s.validateGraphRequest(req); err != nil {
		return nil, err
	}
	in := &graphInput{req: req, include: map[string]bool{}}
	var fes sharding.Errors
	var err error
	if in.model, err = cost.Resolve(in.req.CostModel, "cost_model"); err != nil {
		fes = appendFieldErrors(fes, err)
	}
	if in.req.Module != "" {
		if err := s.importModule(ctx, in); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			fes = appendFieldErrors(fes, err)
		}
	} else {
		m, err := parseMesh(in.req.Mesh, "mesh", s.limits)
		if err != nil {
			return nil, err
		}
		in.mesh = m
		// Nested while regions cost a pass over their bytes per level when decoded:
		// refuse a graph nested far too deep from one linear scan first ("ops" lists
		// inside while regions: the top list, one per level, and one for a while's
		// possibly empty regions at the last level), then let toGraph name the
		// exact op.
		if path, deep := opsNesting(req, body, s.limits.MaxGraphDepth+2); s.limits.MaxGraphDepth > 0 && deep {
			return nil, limitExceeded(path, "while ops nest deeper than %d levels (SHARDPLAN_MAX_GRAPH_DEPTH); flatten the loops, or raise the limit", s.limits.MaxGraphDepth)
		}
		in.graph, in.opts, err = req.toGraph(m, s.limits.MaxGraphDepth)
		if de, ok := errors.AsType[*DepthError](err); ok {
			return nil, limitExceeded(de.Field, "while ops nest deeper than %d levels (SHARDPLAN_MAX_GRAPH_DEPTH); flatten the loops, or raise the limit", de.Limit)
		}
		if err != nil {
			fes = appendFieldErrors(fes, err)
		}
	}
	if len(fes) > 0 {
		return nil, fes
	}
	if err := s.checkGraphLimits(in.graph); err != nil {
		return nil, err
	}
	in.strategy = planner.Optimal
	if in.req.Strategy == string(planner.XLA) {
		in.strategy = planner.XLA
	}
	for _, i := range in.req.Include {
		in.include[i] = true
	}
	if in.remat, err = allowRemat(in.req.FullRematerialization, in.req.Policy); err != nil {
		return nil, err
	}
	in.effort = effortOf(in.req.Effort)
	return in, nil
}

// planning is the effort and the planning budget of every reshard (and reduction) the
// graph plans: the request's under strategy optimal; under xla, which they do not
// apply to (nor enter the plan id), the default effort and no budget.
func (in *graphInput) planning() (planner.Effort, time.Duration) {
	if in.strategy != planner.Optimal {
		return planner.EffortThorough, 0
	}
	return in.effort, time.Duration(in.req.PlanningBudgetMS) * time.Millisecond
}

// opsNesting is keyNesting(body, "ops", limit), from the levels readGraphRequest
// recorded when they tell.
func opsNesting(req *GraphRequest, body []byte, limit int) (string, bool) {
	if path, deep, known := req.wire.opsLevels.nesting(limit); known {
		return path, deep
	}
	return keyNesting(body, "ops", limit)
}

// validateGraphRequest checks the request-level rules (graph fields with or without
// module, then the validate tags) and lists every failure.
func (s *Server) validateGraphRequest(req *GraphRequest) error {
	fes := req.checkGraphPresence()
	if err := s.validateStruct(req); err != nil {
		p, ok := err.(*Problem)
		if !ok {
			return err
		}
		fes = append(fes, domainFieldErrors(p.Errors)...)
	}
	if len(fes) > 0 {
		return Invalid(slugInvalidRequest, "Invalid request", fes...)
	}
	return nil
}

// checkGraphLimits enforces the graph-size and rank limits.
func (s *Server) checkGraphLimits(g *propagation.Graph) error {
	lim := s.limits
	if lim.MaxGraphTensors > 0 && len(g.Tensors) > lim.MaxGraphTensors {
		return tooManyTensors(len(g.Tensors), lim.MaxGraphTensors)
	}
	if n := g.NumOps(); lim.MaxGraphOps > 0 && n > lim.MaxGraphOps {
		return limitExceeded("ops", "has %d ops (regions included); the limit is %d (SHARDPLAN_MAX_GRAPH_OPS)", n, lim.MaxGraphOps)
	}
	// The first id in sorted order whose shape is over the rank or element limit (or
	// has a dim < 1), found without sorting.
	bad, found := "", false
	var badErr error
	for id, t := range g.Tensors {
		if found && id > bad {
			continue
		}
		if err := shapeWithin(t.Shape, "tensors."+id+".shape", lim, 0); err != nil {
			bad, found, badErr = id, true, err
		}
	}
	return badErr
}

// tooManyTensors is the 400 of a graph of n tensors, over the limit most.
func tooManyTensors(n, most int) *Problem {
	return limitExceeded("tensors", "has %d tensors; the limit is %d (SHARDPLAN_MAX_GRAPH_TENSORS)", n, most)
}

// OpaqueOpJSON is an op of a module that the import does not model: nothing propagates
// through it.
type OpaqueOpJSON struct {
	Op      string   `json:"op" example:"stablehlo.sort"`
	Results []string `json:"results"`
	Line    int      `json:"line" example:"12"`
	Column  int      `json:"column" example:"5"`
} // @name OpaqueOp

func opaqueOpsJSON(ops []stablehlo.OpaqueOp) []OpaqueOpJSON {
	out := make([]OpaqueOpJSON, len(ops))
	for i, o := range ops {
		out[i] = OpaqueOpJSON{Op: o.Op, Results: o.Results, Line: o.Line, Column: o.Column}
	}
	return out
}
