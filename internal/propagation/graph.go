package propagation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Graph is an op graph to shard: tensors by id, ops in any order (a DAG outside while
// regions), and the graph's arguments and results.
type Graph struct {
	Tensors map[string]*Tensor
	Ops     []Op
	Inputs  []string
	Outputs []string
}

// Tensor is one value of the graph. A nil Sharding means no annotation: every dim open
// and empty.
type Tensor struct {
	Shape    []int64
	ElemBits int
	Sharding *sharding.Sharding
}

// Op is one operation. Kind is a StableHLO op name (see SupportedOps); Attrs holds
// its StableHLO attributes by name, with integer lists as []int, []int64 or decoded
// JSON ([]any of float64 or json.Number); nested dimension-number objects as
// map[string]any. Rule is the Shardy rule of a "custom" op. An "opaque" op (any operands
// and results) is a barrier: nothing propagates through it. A "while" op has Cond and
// Body regions whose tensors live in the graph's Tensors.
type Op struct {
	Name     string
	Kind     string
	Operands []string
	Results  []string
	Attrs    map[string]any
	Rule     string
	Cond     *Region
	Body     *Region
}

// NumOps counts g's ops, those of while regions included.
func (g *Graph) NumOps() int { return countOps(g.Ops) }

func countOps(ops []Op) int {
	n := len(ops)
	for _, op := range ops {
		for _, r := range []*Region{op.Cond, op.Body} {
			if r != nil {
				n += countOps(r.Ops)
			}
		}
	}
	return n
}

// Region is the body or condition of a while op: block parameters, ops, returned values.
type Region struct {
	Params  []string
	Ops     []Op
	Returns []string
}

// Conflict resolution strategies.
const (
	Aggressive          = "aggressive"
	Basic               = "basic"
	BasicThenAggressive = "basic_then_aggressive"
)

// Options tune propagation. The zero value is aggressive conflict resolution without
// the op-priority schedule; DefaultOptions is what the API defaults to.
type Options struct {
	// ConflictResolution is Aggressive (default when empty), Basic or
	// BasicThenAggressive.
	ConflictResolution string
	// OpPriority runs Shardy's five-stage op-priority schedule (pass-through ops first).
	OpPriority bool
}

// DefaultOptions is aggressive conflict resolution with op priorities, as API.md
// defaults.
func DefaultOptions() Options { return Options{ConflictResolution: Aggressive, OpPriority: true} }

// ---- JSON wire form (API.md, POST /v1/graph) ----

type wireTensor struct {
	Shape    []int64         `json:"shape"`
	DType    string          `json:"dtype"`
	Sharding json.RawMessage `json:"sharding"`
}

type wireRegion struct {
	Params  []string          `json:"params"`
	Ops     []json.RawMessage `json:"ops"`
	Returns []string          `json:"returns"`
}

type wireOp struct {
	Name     string          `json:"name"`
	Op       string          `json:"op"`
	Operands []string        `json:"operands"`
	Results  []string        `json:"results"`
	Attrs    json.RawMessage `json:"attrs"`
	Rule     string          `json:"rule"`
	Cond     *wireRegion     `json:"cond"`
	Body     *wireRegion     `json:"body"`
}

type wireOptions struct {
	ConflictResolution *string `json:"conflict_resolution"`
	OpPriority         *bool   `json:"op_priority"`
}

type wireGraph struct {
	Tensors json.RawMessage   `json:"tensors"`
	Ops     []json.RawMessage `json:"ops"`
	Inputs  []string          `json:"inputs"`
	Outputs []string          `json:"outputs"`
	Options *wireOptions      `json:"options"`
}

// DefaultMaxDepth is how deep while ops may nest in a graph Decode reads.
const DefaultMaxDepth = 32

// DepthError is Decode's error for while ops nested deeper than its limit. Decoding
// stops at the limit, so a deeper graph costs at most limit passes over its bytes.
type DepthError struct {
	Field string // wire path of the first while op past the limit
	Limit int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("%s: while ops nest deeper than %d", e.Field, e.Limit)
}

// Decode is DecodeLimited with DefaultMaxDepth.
func Decode(data []byte, m *sharding.Mesh) (*Graph, Options, error) {
	return DecodeLimited(data, m, DefaultMaxDepth)
}

// DecodeLimited reads the graph part of a POST /v1/graph body (tensors, ops, inputs, outputs,
// options; other top-level fields are ignored) against mesh m. Annotations are parsed
// with sharding.Parse and may use any of its three forms. Every error is a
// *sharding.FieldError or sharding.Errors naming the wire path
// ("tensors.x.sharding[0]", "ops[3].attrs.permutation"). Decode checks the JSON shape
// only; Validate (called by Propagate) checks the graph itself. Ops inside more than
// maxDepth nested while regions (maxDepth <= 0: DefaultMaxDepth) are a *DepthError:
// each nesting level re-reads its region's bytes, so the limit bounds the work.
func DecodeLimited(data []byte, m *sharding.Mesh, maxDepth int) (*Graph, Options, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	opts := DefaultOptions()
	var w wireGraph
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, opts, jsonError(err, "")
	}
	g := &Graph{Tensors: map[string]*Tensor{}, Inputs: w.Inputs, Outputs: w.Outputs}
	var errs sharding.Errors
	add := func(err error) {
		if es, ok := sharding.AsFieldErrors(err); ok {
			errs = append(errs, es...)
		} else if err != nil {
			errs = append(errs, sharding.Fieldf("", "%v", err))
		}
	}
	if len(bytes.TrimSpace(w.Tensors)) == 0 || bytes.Equal(bytes.TrimSpace(w.Tensors), []byte("null")) {
		add(sharding.Fieldf("tensors", "is required: an object of tensor id -> {shape, dtype, sharding}"))
	} else if err := decodeTensors(w.Tensors, m, g.Tensors); err != nil {
		add(err)
	}
	for i, raw := range w.Ops {
		op, err := decodeOp(raw, "ops["+strconv.Itoa(i)+"]", maxDepth)
		if de, ok := errors.AsType[*DepthError](err); ok {
			de.Limit = maxDepth
			return nil, opts, de
		}
		if err != nil {
			add(err)
			continue
		}
		g.Ops = append(g.Ops, op)
	}
	if w.Options != nil {
		var err error
		if opts, err = w.Options.options(); err != nil {
			add(err)
		}
	}
	if len(errs) > 0 {
		return nil, opts, errs
	}
	return g, opts, nil
}

func (w *wireOptions) options() (Options, error) {
	opts := DefaultOptions()
	if c := w.ConflictResolution; c != nil {
		switch *c {
		case Aggressive, Basic, BasicThenAggressive:
			opts.ConflictResolution = *c
		default:
			return opts, sharding.Fieldf("options.conflict_resolution", "must be %q, %q or %q, not %q", Aggressive, Basic, BasicThenAggressive, *c)
		}
	}
	if p := w.OpPriority; p != nil {
		opts.OpPriority = *p
	}
	return opts, nil
}

// DecodeOptions reads the "options" object of a POST /v1/graph body (raw may be empty:
// DefaultOptions). Errors are *sharding.FieldError values under "options".
func DecodeOptions(raw json.RawMessage) (Options, error) {
	if s := bytes.TrimSpace(raw); len(s) == 0 || bytes.Equal(s, []byte("null")) {
		return DefaultOptions(), nil
	}
	var w wireOptions
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return DefaultOptions(), jsonError(err, "options")
	}
	return w.options()
}

// decodeTensors walks the tensors object token by token so a duplicate id is an error
// rather than a silent overwrite.
func decodeTensors(raw json.RawMessage, m *sharding.Mesh, out map[string]*Tensor) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return sharding.Fieldf("tensors", "must be an object of tensor id -> {shape, dtype, sharding}")
	}
	var errs sharding.Errors
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return sharding.Fieldf("tensors", "malformed JSON: %v", err)
		}
		name, _ := tok.(string)
		field := "tensors." + name
		var wt json.RawMessage
		if err := dec.Decode(&wt); err != nil {
			return sharding.Fieldf(field, "malformed JSON: %v", err)
		}
		if name == "" {
			errs = append(errs, sharding.Fieldf("tensors", "a tensor id must not be empty"))
			continue
		}
		if _, dup := out[name]; dup {
			errs = append(errs, sharding.Fieldf(field, "tensor %q is defined twice; tensor ids must be unique", name))
			continue
		}
		t, err := decodeTensor(wt, m, field)
		if err != nil {
			if es, ok := sharding.AsFieldErrors(err); ok {
				errs = append(errs, es...)
			}
			out[name] = nil
			continue
		}
		out[name] = t
	}
	for k, v := range out {
		if v == nil {
			delete(out, k)
		}
	}
	return errs.Err()
}

func decodeTensor(raw json.RawMessage, m *sharding.Mesh, field string) (*Tensor, error) {
	var wt wireTensor
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wt); err != nil {
		return nil, jsonError(err, field)
	}
	if wt.Shape == nil {
		return nil, sharding.Fieldf(field+".shape", "is required: an array of dim sizes ([] for a scalar)")
	}
	for d, n := range wt.Shape {
		if n < 0 {
			return nil, sharding.Fieldf(field+".shape["+strconv.Itoa(d)+"]", "dim size %d is negative", n)
		}
	}
	t := &Tensor{Shape: wt.Shape, ElemBits: 32}
	if wt.DType != "" {
		bits, ok := sharding.DTypeBits(wt.DType)
		if !ok {
			return nil, sharding.Fieldf(field+".dtype", "unknown dtype %q; known: %s", wt.DType, sharding.KnownDTypes())
		}
		t.ElemBits = bits
	}
	if s := bytes.TrimSpace(wt.Sharding); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		sh, err := sharding.Parse(wt.Sharding, m, wt.Shape, field+".sharding")
		if err != nil {
			return nil, err
		}
		t.Sharding = &sh
	}
	return t, nil
}

// decodeOp decodes one op; depth is how many more while levels may nest inside it.
func decodeOp(raw json.RawMessage, field string, depth int) (Op, error) {
	var w wireOp
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Op{}, jsonError(err, field)
	}
	op := Op{Name: w.Name, Kind: w.Op, Operands: w.Operands, Results: w.Results, Rule: w.Rule}
	if op.Kind == "" {
		return Op{}, sharding.Fieldf(field+".op", "is required; supported ops: %s", strings.Join(SupportedOps(), ", "))
	}
	if a := bytes.TrimSpace(w.Attrs); len(a) > 0 && !bytes.Equal(a, []byte("null")) {
		d := json.NewDecoder(bytes.NewReader(a))
		d.UseNumber()
		if err := d.Decode(&op.Attrs); err != nil {
			return Op{}, sharding.Fieldf(field+".attrs", "must be an object of StableHLO attributes")
		}
	}
	region := func(wr *wireRegion, f string) (*Region, error) {
		if wr == nil {
			return nil, nil
		}
		r := &Region{Params: wr.Params, Returns: wr.Returns}
		if len(wr.Ops) > 0 && depth <= 0 {
			return nil, &DepthError{Field: field} // DecodeLimited sets Limit
		}
		for i, ro := range wr.Ops {
			o, err := decodeOp(ro, f+".ops["+strconv.Itoa(i)+"]", depth-1)
			if err != nil {
				return nil, err
			}
			r.Ops = append(r.Ops, o)
		}
		return r, nil
	}
	var err error
	if op.Cond, err = region(w.Cond, field+".cond"); err != nil {
		return Op{}, err
	}
	if op.Body, err = region(w.Body, field+".body"); err != nil {
		return Op{}, err
	}
	return op, nil
}

func jsonError(err error, field string) error {
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		if b == "" {
			return a
		}
		return a + "." + b
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return sharding.Fieldf(join(field, te.Field), "has the wrong JSON type (%s where %s is expected)", te.Value, te.Type)
	case errors.As(err, &se):
		return sharding.Fieldf(field, "malformed JSON at offset %d: %v", se.Offset, se)
	}
	if name, ok := fielderr.UnknownJSONField(err); ok {
		return sharding.Fieldf(join(field, name), "unknown field")
	}
	return sharding.Fieldf(field, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// sortedKeys returns the keys of m sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
