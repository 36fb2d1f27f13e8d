package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The wire schema of POST /v1/graph: GraphRequest and the types under it are the one
// description of the body (swag documents them) and what readGraphRequest fills, in one
// pass over the bytes. A StableHLO module comes as "module" in a JSON body, or as the raw
// text with Content-Type: application/mlir and the other fields as query parameters
// (moduleRequest). graphdomain.go converts the request to propagation's graph.

// GraphRequest is the body of POST /v1/graph (API.md). Every field it rejects is named by
// its path ("tensors.x.sharding[0]", "ops[3].attrs.permutation").
type GraphRequest struct {
	// Mesh is a mesh object, the string "x=2,y=4", or a mesh as JAX, Shardy or torch
	// print it. With a module that declares an sdy.mesh it may be left out (required
	// without module).
	Mesh json.RawMessage `json:"mesh,omitempty" swaggertype:"object"`
	// Module is a StableHLO module in MLIR text (jax's lower(...).as_text(), Shardy's
	// printed form or the generic form) instead of tensors, ops, inputs and outputs.
	// Tensor ids are its SSA names (arg0, 0, 1#1) and result0, result1, ...
	Module string `json:"module,omitempty" example:"sdy.mesh @mesh = <[\"x\"=2]> func.func @main(...) {...}"`
	// Function is the module's function to plan (default main).
	Function string `json:"function,omitempty" example:"main"`
	// Tensors maps each tensor id to its shape, dtype and optional sharding annotation
	// (any input form; a tensor without one has every dim open). Required without
	// module; absent with it.
	Tensors map[string]GraphTensor `json:"tensors,omitempty"`
	// Ops in any order (a DAG outside while regions); absent with module.
	Ops []GraphOp `json:"ops,omitempty"`
	// Inputs and Outputs are the graph's arguments and results (tensor ids); absent with
	// module.
	Inputs  []string `json:"inputs,omitempty"`
	Outputs []string `json:"outputs,omitempty"`
	// Options tune propagation.
	Options *GraphOptions `json:"options,omitempty"`
	// CostModel is a profile name from GET /v1/cost-models or an object (default tpu-v5p).
	CostModel json.RawMessage `json:"cost_model,omitempty" swaggertype:"object"`
	// Strategy plans every reshard the optimal way (default) or predicts XLA's.
	Strategy string `json:"strategy,omitempty" validate:"omitempty,oneof=optimal xla" enums:"optimal,xla"`
	// Include asks for extra lists: ops (the sharding each op computes in: factors,
	// operand and result layouts), pairs (steps' collective_permute pairs and
	// all_to_all_v transfers as explicit lists, not runs).
	Include []string `json:"include,omitempty" validate:"omitempty,max=4,dive,oneof=ops pairs" enums:"ops,pairs"`
	// Policy: forbid_full_rematerialization turns a graph with a rematerializing reshard
	// into a 422.
	Policy *Policy `json:"policy,omitempty"`
	// FullRematerialization applies to every reshard (strategy optimal): avoid (default)
	// makes a plan without a full rematerialization win whatever the times; allow makes
	// the fastest plan win (not with policy.forbid_full_rematerialization).
	FullRematerialization string `json:"full_rematerialization,omitempty" validate:"omitempty,oneof=avoid allow" enums:"avoid,allow"`
	// Effort applies to every reshard (strategy optimal): thorough (default), fast or
	// exhaustive (ReshardRequest.effort).
	Effort string `json:"effort,omitempty" validate:"omitempty,oneof=thorough fast exhaustive" enums:"thorough,fast,exhaustive"`
	// PlanningBudgetMS applies to each distinct reshard (strategy optimal;
	// ReshardRequest.planning_budget_ms): the graph's reshards share the time left
	// before the request's deadline, each at most its share of it.
	PlanningBudgetMS int `json:"planning_budget_ms,omitempty" validate:"omitempty,gte=1,lte=600000" minimum:"1" maximum:"600000"`

	wire graphWire // what the reader saw beyond the values
} // @name GraphRequest

// GraphTensor is one tensor of a graph.
type GraphTensor struct {
	// Shape is the tensor's shape (or give tensor instead).
	Shape []int64 `json:"shape" example:"8,16"`
	// DType is the element type (default f32).
	DType string `json:"dtype,omitempty" example:"bf16"`
	// Sharding is an annotation in any input form (object, Shardy text, PartitionSpec
	// array or "P(...)" text, XLA HloSharding text, DTensor {"placements": [...]}).
	Sharding json.RawMessage `json:"sharding,omitempty" swaggertype:"object"`
	// Tensor is the shape and dtype in one, as MLIR or XLA print a tensor type
	// ("tensor<8x16xbf16>", "bf16[8,16]"), instead of shape and dtype.
	Tensor string `json:"tensor,omitempty" example:"tensor<8x16xbf16>"`

	err *fielderr.FieldError // the first value of the wrong JSON type or unknown field (path relative to the tensor)
} // @name GraphTensor

// GraphOp is one op of a graph: a StableHLO op name and attributes.
type GraphOp struct {
	Name     string   `json:"name" example:"mm"`
	Op       string   `json:"op" example:"dot_general"`
	Operands []string `json:"operands"`
	Results  []string `json:"results"`
	// Attrs holds the op's StableHLO attributes by name (numbers as json.Number).
	Attrs map[string]any `json:"attrs,omitempty"`
	// Rule is the Shardy sharding rule of a "custom" op.
	Rule string `json:"rule,omitempty" example:"([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}"`
	// Cond and Body are the regions of a "while" op.
	Cond *GraphRegion `json:"cond,omitempty"`
	Body *GraphRegion `json:"body,omitempty"`

	err      *fielderr.FieldError // as GraphTensor.err, relative to the op
	attrsBad bool                 // attrs is neither an object nor null
} // @name GraphOp

// GraphRegion is the condition or body of a while op.
type GraphRegion struct {
	Params  []string  `json:"params"`
	Ops     []GraphOp `json:"ops" swaggertype:"array,object"`
	Returns []string  `json:"returns"`
} // @name GraphRegion

// GraphOptions tune propagation.
type GraphOptions struct {
	ConflictResolution *string `json:"conflict_resolution,omitempty" enums:"aggressive,basic,basic_then_aggressive"`
	OpPriority         *bool   `json:"op_priority,omitempty"`
} // @name GraphOptions

// graphWire is what reading a GraphRequest noticed that its values do not hold: which
// graph fields were given (null included), the tensors' order in the body, and the
// errors of the graph part, reported after the request-level checks.
type graphWire struct {
	tensors, ops, inputs, outputs bool     // given, even as null
	tensorsNull, tensorsNotObject bool     // "tensors": null, or not an object
	order                         []string // tensor ids as they appear
	// err is the first value of the wrong JSON type in ops, inputs, outputs or options.
	err *fielderr.FieldError
	// optionsErr is the first wrong type or unknown field in options (a module request
	// reads options strictly).
	optionsErr *fielderr.FieldError
	// opsLevels is where "ops" lists first nest to each level (while regions).
	opsLevels keyLevels
}

// Type names in "wrong JSON type" messages.
const (
	typeInt64s   = "[]int64"
	typeStrings  = "[]string"
	typeTensor   = "api.GraphTensor"
	typeOp       = "api.GraphOp"
	typeOps      = "[]api.GraphOp"
	typeRegion   = "api.GraphRegion"
	typeOptions  = "api.GraphOptions"
	typeString   = "string"
	typeInt64    = "int64"
	typeBool     = "bool"
	unknownField = "unknown field"
)

// wrongType is the graph part's message for a value of the wrong JSON type.
func wrongType(field, value, want string) *fielderr.FieldError {
	return fielderr.New(field, "has the wrong JSON type (%s where %s is expected)", value, want)
}

// readGraphRequest reads body into a GraphRequest in one pass. Malformed JSON, a body
// that is not an object, a repeated key and a wrong or unknown request-level field are
// 400 invalid-json problems as decodeBytes gives them; errors inside the graph part
// (tensors, ops, inputs, outputs, options) are kept for toGraph.
func readGraphRequest(body []byte) (*GraphRequest, error) {
	req, top, err := readGraphBody(body, nil)
	if err != nil {
		return nil, err
	}
	if top != nil {
		return nil, top
	}
	return req, nil
}

// readGraphBody is readGraphRequest for a body that may hold more top-level fields than
// a graph request's: other (nil: none) sees every top-level key first, and reads the
// value of one that is not a graph request's and reports true, or reports false having
// read nothing. Malformed JSON and a body that is not an object are err; top is the
// first request-level problem (a wrong type, an unknown field) or, when there is none,
// a repeated key.
func readGraphBody(body []byte, other func(r *wireReader, key string) bool) (req *GraphRequest, top *Problem, err error) {
	if !json.Valid(body) {
		// decodeBytes words every way a body is not one JSON value.
		var v map[string]json.RawMessage
		if err := decodeBytes(body, &v); err != nil {
			return nil, nil, err
		}
	}
	r := &wireReader{b: body}
	r.ws()
	if r.b[r.i] != '{' {
		var v map[string]json.RawMessage
		return nil, nil, decodeBytes(body, &v) // "the body must be a JSON object, not ..."
	}
	req = &GraphRequest{}
	r.object(func(key string) {
		if other != nil && other(r, key) {
			return
		}
		p := r.topField(req, key)
		if top == nil {
			top = p
		}
	})
	if top != nil {
		return req, top, nil
	}
	req.wire.opsLevels = keyLevels{name: "ops"}
	if path, dup := duplicateKeyAndLevels(body, &req.wire.opsLevels); dup {
		return req, Invalid(slugInvalidJSON, "Malformed JSON",
			sharding.Fieldf(path, "is given more than once; give each key once (with duplicates it is unclear which value is meant)")), nil
	}
	return req, nil, nil
}

// topField reads the value of top-level key into req; it returns a request-level
// problem (the value is skipped) or nil.
func (r *wireReader) topField(req *GraphRequest, key string) *Problem {
	w := &req.wire
	switch {
	case foldEq(key, "mesh"):
		req.Mesh = r.raw()
	case foldEq(key, "cost_model"):
		req.CostModel = r.raw()
	case foldEq(key, "module"):
		return r.topString(&req.Module, key)
	case foldEq(key, "function"):
		return r.topString(&req.Function, key)
	case foldEq(key, "strategy"):
		return r.topString(&req.Strategy, key)
	case foldEq(key, "include"):
		return r.topStrings(&req.Include, key)
	case foldEq(key, "policy"):
		return r.topPolicy(&req.Policy, key)
	case foldEq(key, "full_rematerialization"):
		return r.topString(&req.FullRematerialization, key)
	case foldEq(key, "effort"):
		return r.topString(&req.Effort, key)
	case foldEq(key, "planning_budget_ms"):
		return r.topInt(&req.PlanningBudgetMS, key)
	case foldEq(key, "tensors"):
		w.tensors = true
		r.tensors(req)
	case foldEq(key, "ops"):
		w.ops = true
		var fe *fielderr.FieldError
		req.Ops = r.ops(&fe, "ops")
		w.keep(fe)
	case foldEq(key, "inputs"):
		w.inputs = true
		var fe *fielderr.FieldError
		req.Inputs = r.strings(&fe, "inputs")
		w.keep(fe)
	case foldEq(key, "outputs"):
		w.outputs = true
		var fe *fielderr.FieldError
		req.Outputs = r.strings(&fe, "outputs")
		w.keep(fe)
	case foldEq(key, "options"):
		r.options(req)
	default:
		r.skip()
		return unknownFieldProblem(key, key, reflect.TypeFor[GraphRequest]())
	}
	return nil
}

func (w *graphWire) keep(fe *fielderr.FieldError) {
	if w.err == nil {
		w.err = fe
	}
}

// topTypeError is decodeBytes' problem for a request-level value of the wrong type.
func topTypeError(path, want, got string) *Problem {
	return Invalid(slugInvalidJSON, "Malformed JSON", sharding.Fieldf(path, "must be %s, not a JSON %s", want, got))
}

func (r *wireReader) topString(dst *string, path string) *Problem {
	switch c := r.peek(); c {
	case 'n':
		r.skip()
	case '"':
		*dst = r.str()
	default:
		got := r.valueWord()
		r.skip()
		return topTypeError(path, "a string", got)
	}
	return nil
}

// topInt reads an integer as json.Unmarshal reads one into an int, with its message
// for any other value.
func (r *wireReader) topInt(dst *int, path string) *Problem {
	switch c := r.peek(); {
	case c == 'n':
		r.skip()
	case c == '-' || (c >= '0' && c <= '9'):
		lit := string(r.raw())
		n, err := strconv.Atoi(lit)
		if err != nil {
			return topTypeError(path, "an integer (within range)", "number "+lit)
		}
		*dst = n
	default:
		got := r.valueWord()
		r.skip()
		return topTypeError(path, "an integer (within range)", got)
	}
	return nil
}

func (r *wireReader) topStrings(dst *[]string, path string) *Problem {
	switch r.peek() {
	case 'n':
		r.skip()
		return nil
	case '[':
	default:
		got := r.valueWord()
		r.skip()
		return topTypeError(path, "an array", got)
	}
	var first *Problem
	out := []string{}
	r.array(func(i int) {
		var s string
		if p := r.topString(&s, path+"["+strconv.Itoa(i)+"]"); p != nil && first == nil {
			first = p
		}
		out = append(out, s)
	})
	*dst = out
	return first
}

func (r *wireReader) topPolicy(dst **Policy, path string) *Problem {
	switch r.peek() {
	case 'n':
		r.skip()
		*dst = nil
		return nil
	case '{':
	default:
		got := r.valueWord()
		r.skip()
		return topTypeError(path, "an object", got)
	}
	p := &Policy{}
	var first *Problem
	r.object(func(key string) {
		var e *Problem
		if foldEq(key, "forbid_full_rematerialization") {
			switch r.peek() {
			case 't', 'f':
				p.ForbidFullRematerialization = r.b[r.i] == 't'
				r.skip()
			case 'n':
				r.skip()
			default:
				got := r.valueWord()
				r.skip()
				e = topTypeError(path+"."+key, "a boolean", got)
			}
		} else {
			r.skip()
			e = unknownFieldProblem(path+"."+key, key, reflect.TypeFor[GraphRequest]())
		}
		if first == nil {
			first = e
		}
	})
	*dst = p
	return first
}

// tensors reads the tensors object in body order.
func (r *wireReader) tensors(req *GraphRequest) {
	w := &req.wire
	switch r.peek() {
	case 'n':
		r.skip()
		w.tensorsNull = true
		return
	case '{':
	default:
		r.skip()
		w.tensorsNotObject = true
		return
	}
	// The tensors are collected first and the map is made at its size: growing a map
	// of 100k tensors rehashes it a dozen times.
	var ts chunks[GraphTensor]
	var ids chunks[string]
	r.object(func(id string) {
		var t GraphTensor
		switch r.peek() {
		case 'n':
			r.skip()
		case '{':
			r.object(func(key string) { r.tensorField(&t, key) })
		default:
			t.err = wrongType("", r.valueWord(), typeTensor)
			r.skip()
		}
		ts.add(t)
		ids.add(id)
	})
	w.order = ids.all()
	req.Tensors = make(map[string]GraphTensor, len(w.order))
	for i, t := range ts.all() {
		req.Tensors[w.order[i]] = t
	}
}

// chunks collects values of unknown number in chunks (growing with the count, up to
// maxChunk values), so that a long list is copied once (all) rather than at every
// growth of one slice.
type chunks[T any] struct {
	full [][]T
	cur  []T
	n    int
}

// maxChunk is how many values a chunk holds at most.
const maxChunk = 1024

func (c *chunks[T]) add(v T) {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.full = append(c.full, c.cur)
		}
		c.cur = make([]T, 0, min(max(16, c.n), maxChunk))
	}
	c.cur = append(c.cur, v)
	c.n++
}

// all returns the values in order in one slice (empty, not nil, when there are none).
func (c *chunks[T]) all() []T {
	if len(c.full) == 0 && c.cur != nil {
		return c.cur
	}
	out := make([]T, 0, c.n)
	for _, ch := range c.full {
		out = append(out, ch...)
	}
	return append(out, c.cur...)
}

func (r *wireReader) tensorField(t *GraphTensor, key string) {
	var fe *fielderr.FieldError
	switch {
	case foldEq(key, "shape"):
		t.Shape = r.int64s(&fe, "shape")
	case foldEq(key, "dtype"):
		r.constString(&t.DType, &fe, "dtype")
	case foldEq(key, "tensor"):
		r.constString(&t.Tensor, &fe, "tensor")
	case foldEq(key, "sharding"):
		if t.Sharding = r.raw(); string(t.Sharding) == "null" {
			t.Sharding = nil
		}
	default:
		r.skip()
		fe = fielderr.New(key, unknownField)
	}
	if t.err == nil {
		t.err = fe
	}
}

// ops reads a list of ops (the top list or a region's); path is the list's path
// relative to the value holding it, for a wrong type.
func (r *wireReader) ops(fe **fielderr.FieldError, path string) []GraphOp {
	if !r.begin('[', fe, path, typeOps) {
		return nil
	}
	var out chunks[GraphOp]
	r.array(func(int) {
		var op GraphOp
		switch r.peek() {
		case 'n':
			r.skip()
		case '{':
			r.object(func(key string) { r.opField(&op, key) })
		default:
			op.err = wrongType("", r.valueWord(), typeOp)
			r.skip()
		}
		out.add(op)
	})
	return out.all()
}

func (r *wireReader) opField(op *GraphOp, key string) {
	var fe *fielderr.FieldError
	switch {
	case foldEq(key, "name"):
		r.string(&op.Name, &fe, "name")
	case foldEq(key, "op"):
		r.constString(&op.Op, &fe, "op")
	case foldEq(key, "operands"):
		op.Operands = r.strings(&fe, "operands")
	case foldEq(key, "results"):
		op.Results = r.strings(&fe, "results")
	case foldEq(key, "rule"):
		r.string(&op.Rule, &fe, "rule")
	case foldEq(key, "attrs"):
		switch r.peek() {
		case 'n':
			r.skip()
			op.Attrs = nil
		case '{':
			op.Attrs = r.value().(map[string]any)
		default:
			r.skip()
			op.attrsBad = true
		}
	case foldEq(key, "cond"):
		op.Cond = r.region(&fe, "cond")
	case foldEq(key, "body"):
		op.Body = r.region(&fe, "body")
	default:
		r.skip()
		fe = fielderr.New(key, unknownField)
	}
	if op.err == nil {
		op.err = fe
	}
}

// region reads a while op's region. An unknown field inside it is named without the
// region ("ops[0].paramz"), as the service always has.
func (r *wireReader) region(fe **fielderr.FieldError, path string) *GraphRegion {
	if !r.begin('{', fe, path, typeRegion) {
		return nil
	}
	g := &GraphRegion{}
	r.object(func(key string) {
		switch {
		case foldEq(key, "params"):
			g.Params = r.strings(fe, path+".params")
		case foldEq(key, "returns"):
			g.Returns = r.strings(fe, path+".returns")
		case foldEq(key, "ops"):
			g.Ops = r.ops(fe, path+".ops")
		default:
			r.skip()
			setFirst(fe, fielderr.New(key, unknownField))
		}
	})
	return g
}

// options reads the options object: a wrong type is a graph error; an unknown field
// only matters to a module request.
func (r *wireReader) options(req *GraphRequest) {
	const path = "options"
	w := &req.wire
	switch r.peek() {
	case 'n':
		r.skip()
		req.Options = nil
		return
	case '{':
	default:
		fe := wrongType(path, r.valueWord(), typeOptions)
		r.skip()
		w.keep(fe)
		setFirst(&w.optionsErr, fe)
		return
	}
	o := &GraphOptions{}
	r.object(func(key string) {
		var fe *fielderr.FieldError
		switch {
		case foldEq(key, "conflict_resolution"):
			if r.peek() == 'n' {
				r.skip()
				o.ConflictResolution = nil
				break
			}
			var s string
			if r.string(&s, &fe, path+".conflict_resolution"); fe == nil {
				o.ConflictResolution = &s
			}
		case foldEq(key, "op_priority"):
			if r.peek() == 'n' {
				r.skip()
				o.OpPriority = nil
				break
			}
			var b bool
			if r.bool(&b, &fe, path+".op_priority"); fe == nil {
				o.OpPriority = &b
			}
		default:
			r.skip()
			setFirst(&w.optionsErr, fielderr.New(path+"."+key, unknownField))
			return
		}
		w.keep(fe)
		setFirst(&w.optionsErr, fe)
	})
	req.Options = o
}

func setFirst(dst **fielderr.FieldError, fe *fielderr.FieldError) {
	if *dst == nil && fe != nil {
		*dst = fe
	}
}

// foldEq matches a JSON key to a field name as encoding/json does: exactly, or else
// case-insensitively.
func foldEq(key, name string) bool {
	return key == name || strings.EqualFold(key, name)
}

// begin reports whether the next value opens with open ('[' or '{'). Otherwise the value
// is skipped: null quietly, another type as a wrong type (want) at path in *fe.
func (r *wireReader) begin(open byte, fe **fielderr.FieldError, path, want string) bool {
	switch r.peek() {
	case open:
		return true
	case 'n':
		r.skip()
		return false
	}
	setFirst(fe, wrongType(path, r.valueWord(), want))
	r.skip()
	return false
}

// string reads a string value into dst (null leaves it); another type sets *fe.
func (r *wireReader) string(dst *string, fe **fielderr.FieldError, path string) {
	r.stringWith(r.str, dst, fe, path)
}

// constString is string for a value that is mostly one of wireConsts (op kinds,
// dtypes).
func (r *wireReader) constString(dst *string, fe **fielderr.FieldError, path string) {
	r.stringWith(r.constStr, dst, fe, path)
}

func (r *wireReader) stringWith(str func() string, dst *string, fe **fielderr.FieldError, path string) {
	switch r.peek() {
	case '"':
		*dst = str()
	case 'n':
		r.skip()
	default:
		setFirst(fe, wrongType(path, r.valueWord(), typeString))
		r.skip()
	}
}

func (r *wireReader) bool(dst *bool, fe **fielderr.FieldError, path string) {
	switch r.peek() {
	case 't', 'f':
		*dst = r.b[r.i] == 't'
		r.skip()
	case 'n':
		r.skip()
	default:
		setFirst(fe, wrongType(path, r.valueWord(), typeBool))
		r.skip()
	}
}

// strings reads a list of strings (null: nil; [] is empty, not nil).
func (r *wireReader) strings(fe **fielderr.FieldError, path string) []string {
	if !r.begin('[', fe, path, typeStrings) {
		return nil
	}
	out := []string{}
	r.array(func(int) {
		var s string
		r.string(&s, fe, path)
		out = append(out, s)
	})
	return out
}

// int64s reads a list of integers; a number that is not one is a wrong type naming it.
func (r *wireReader) int64s(fe **fielderr.FieldError, path string) []int64 {
	if !r.begin('[', fe, path, typeInt64s) {
		return nil
	}
	out := []int64{}
	r.array(func(int) {
		var v int64
		switch c := r.peek(); {
		case c == 'n':
			r.skip()
		case c == '-' || (c >= '0' && c <= '9'):
			lit := r.raw()
			n, err := strconv.ParseInt(string(lit), 10, 64)
			if err != nil {
				setFirst(fe, wrongType(path, "number "+string(lit), typeInt64))
			}
			v = n
		default:
			setFirst(fe, wrongType(path, r.valueWord(), typeInt64))
			r.skip()
		}
		out = append(out, v)
	})
	return out
}

// moduleQuery lists the query parameters of a raw MLIR body, each the JSON field of
// the same name.
var moduleQuery = []string{"function", "mesh", "strategy", "cost_model", "conflict_resolution", "op_priority", "include"}

// moduleRequest reads a raw MLIR body (Content-Type: application/mlir) and its query
// parameters into the GraphRequest the equivalent JSON body gives. A JSON body gives a
// nil request.
func moduleRequest(r *http.Request, body []byte) (*GraphRequest, error) {
	if !isMLIR(r) {
		return nil, nil
	}
	return moduleRequestOf(r.URL.Query(), body)
}

// moduleRequestOf is the GraphRequest of a raw MLIR body and the query parameters q,
// taking the module text as it is (one copy of the body, never escaped into JSON and
// decoded again).
func moduleRequestOf(q url.Values, body []byte) (req *GraphRequest, err error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, Invalid(slugInvalidModule, "Invalid module", sharding.Fieldf("module", "the request body is empty; send the module's MLIR text"))
	}
	if err := checkQuery(q, moduleQuery, "a module body"); err != nil {
		return nil, err
	}
	req = &GraphRequest{Module: string(body), Function: q.Get("function"), Strategy: q.Get("strategy")}
	for _, f := range []struct {
		name string
		dst  *json.RawMessage
	}{{"mesh", &req.Mesh}, {"cost_model", &req.CostModel}} {
		*f.dst = queryJSON(q, f.name)
	}
	opts := &GraphOptions{}
	if v := q.Get("conflict_resolution"); v != "" {
		opts.ConflictResolution = &v
	}
	switch v := q.Get("op_priority"); v {
	case "":
	case "true", "false":
		b := v == "true"
		opts.OpPriority = &b
	default:
		return nil, Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("op_priority", "must be true or false (got %q)", v))
	}
	if *opts != (GraphOptions{}) {
		req.Options = opts
	}
	if v := q.Get("include"); v != "" {
		req.Include = strings.Split(v, ",")
	}
	return req, nil
}

// queryJSON is query parameter name as the JSON string of a raw field, nil when absent.
func queryJSON(q url.Values, name string) json.RawMessage {
	v := q.Get(name)
	if v == "" {
		return nil
	}
	b, _ := json.Marshal(v) // a string always encodes
	return b
}
