package sharding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
)

// Parse reads a sharding in any of the three wire forms from raw JSON (an object, a
// Shardy text string, or a PartitionSpec-like array), checks every invariant for a
// tensor of the given shape on mesh m (shape nil: any rank), and returns it in canonical
// form. field is the value's wire path ("source"); errors name paths under it.
func Parse(raw json.RawMessage, m *Mesh, shape []int64, field string) (Sharding, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Sharding{}, Fieldf(field, "is required: give an object, a Shardy string or a PartitionSpec-like array")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Sharding{}, Fieldf(field, "is not a valid JSON string")
		}
		return ParseString(s, m, shape, field)
	case '[':
		return parseArray(raw, m, shape, field)
	case '{':
		return parseObject(raw, m, shape, field)
	}
	return Sharding{}, Fieldf(field, "must be an object, a Shardy string or a PartitionSpec-like array, not %s", jsonKind(raw))
}

func jsonKind(raw []byte) string {
	switch {
	case len(raw) == 0:
		return "nothing"
	case !json.Valid(raw):
		return "malformed JSON"
	case raw[0] == '"':
		return "a string"
	case raw[0] == '[':
		return "an array"
	case raw[0] == '{':
		return "an object"
	case raw[0] == 't' || raw[0] == 'f':
		return "a boolean"
	case raw[0] == 'n':
		return "null"
	default:
		return "a number"
	}
}

func finish(s Sharding, m *Mesh, shape []int64, pt pather) (Sharding, error) {
	if err := validate(&s, shape, pt); err != nil {
		return Sharding{}, err
	}
	s.Canonicalize(m)
	return s, nil
}

// ParseString parses a sharding given as a string: XLA's HloSharding text when it starts
// with '{' and a word or a second '{' (ParseHLO), a PartitionSpec when it starts with
// P( or PartitionSpec( (ParsePartitionSpecText), the repr of a JAX NamedSharding or
// GSPMDSharding (what jax.Array.sharding prints), else Shardy's textual form (ParseText;
// `{"x"}` is a Shardy dim missing its brackets).
//
// What the frameworks print around these is read too (printed.go): an HLO dump's
// "sharding={...}, metadata={...}", Shardy's "#sdy.sharding<@mesh, [...]>" and
// "<@mesh, [...]>", and DTensor placements as torch prints them ("(Shard(dim=0),
// Replicate())", a DTensor repr's placements=...). Errors say which form the text was
// read as.
func ParseString(text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	form := ShardingForm(text)
	s, err := parseStringAs(form, text, m, shape, field)
	if err != nil {
		return Sharding{}, withForm(err, form)
	}
	return s, nil
}

func parseStringAs(form, text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	switch form {
	case formHLO:
		return ParseHLO(text, m, shape, field)
	case formHLODump:
		return parseHLODump(text, m, shape, field)
	case formPSpec:
		return ParsePartitionSpecText(text, m, shape, field)
	case formJAXRepr:
		return parseJAXRepr(text, m, shape, field)
	case formPlacements, formDTensor:
		return parsePlacementsText(text, m, shape, field)
	}
	return ParseText(text, m, shape, field)
}

// ---- object form ----

// The object form is decoded level by level (every value first as raw JSON) so that each
// error names the exact wire path, array indices included: encoding/json's own paths
// drop the indices ("dims.open") and its unknown-field errors drop the path entirely.

type objSharding struct {
	Dims       json.RawMessage `json:"dims"`
	Replicated json.RawMessage `json:"replicated"`
	Unreduced  json.RawMessage `json:"unreduced"`
	Text       json.RawMessage `json:"text"`
	// Output-only renderings of the same sharding, accepted back and ignored.
	Hlo           json.RawMessage `json:"hlo"`
	PartitionSpec json.RawMessage `json:"partition_spec"`
	// Placements is the DTensor form, instead of dims.
	Placements json.RawMessage `json:"placements"`
}

type objDim struct {
	Axes     json.RawMessage `json:"axes"`
	Open     json.RawMessage `json:"open"`
	Priority json.RawMessage `json:"priority"`
}

type objPather string

func (p objPather) whole() string { return join(string(p), "dims") }
func (p objPather) dim(d int) (string, string) {
	return index(join(string(p), "dims"), d), ""
}
func (p objPather) ref(pl place) (string, string) {
	switch pl.list {
	case 1:
		return index(join(string(p), "replicated"), pl.k), ""
	case 2:
		return index(join(string(p), "unreduced"), pl.k), ""
	}
	return index(join(index(join(string(p), "dims"), pl.dim), "axes"), pl.k), ""
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// decodeStrict decodes one JSON object into v, rejecting unknown fields and trailing data.
func decodeStrict(raw []byte, v any, field, allowed string) *FieldError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		fe := jsonFieldError(err, field)
		if _, unknown := fielderr.UnknownJSONField(err); unknown {
			fe.Message = "unknown field; allowed fields are " + allowed
		}
		return fe
	}
	if _, err := dec.Token(); err != io.EOF {
		return Fieldf(field, "has data after the JSON value; send exactly one JSON value")
	}
	return nil
}

// rawList decodes an optional JSON array (null or absent: empty).
func rawList(raw json.RawMessage, field, what string) ([]json.RawMessage, *FieldError) {
	if isNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, Fieldf(field, "must be an array of %s, not %s", what, jsonKind(bytes.TrimSpace(raw)))
	}
	return items, nil
}

func parseObject(raw json.RawMessage, m *Mesh, shape []int64, field string) (Sharding, error) {
	var o objSharding
	if fe := decodeStrict(raw, &o, field, "dims, replicated, unreduced, text, hlo, partition_spec, placements"); fe != nil {
		return Sharding{}, fe
	}
	pt := objPather(field)
	dimsField := join(field, "dims")
	if !isNull(o.Placements) {
		if !isNull(o.Dims) || !isNull(o.Replicated) || !isNull(o.Unreduced) {
			return Sharding{}, Fieldf(join(field, "placements"), "give either placements (DTensor) or dims/replicated/unreduced, not both")
		}
		return parsePlacements(o.Placements, m, shape, join(field, "placements"))
	}
	if isNull(o.Dims) {
		return Sharding{}, Fieldf(dimsField, "is required: one {\"axes\": [...]} per tensor dim (or give DTensor \"placements\")")
	}
	dims, fe := rawList(o.Dims, dimsField, "{\"axes\": [...]} objects, one per tensor dim")
	if fe != nil {
		return Sharding{}, fe
	}
	var errs Errors
	refs := func(raw json.RawMessage, f string) []AxisRef {
		if fe := tooManyRefs(m, arrayLen(raw), f); fe != nil {
			errs = append(errs, fe)
			return nil
		}
		items, fe := rawList(raw, f, "axis names")
		if fe != nil {
			errs = append(errs, fe)
			return nil
		}
		var out []AxisRef
		for k, it := range items {
			r, err := parseRefJSON(it, m, index(f, k))
			if err != nil {
				errs = append(errs, err.(*FieldError))
				continue
			}
			out = append(out, r)
		}
		return out
	}
	s := Sharding{Dims: make([]DimSharding, len(dims))}
	for d, rd := range dims {
		f := index(dimsField, d)
		ds := DimSharding{Priority: NoPriority}
		var od objDim
		if b := bytes.TrimSpace(rd); len(b) == 0 || b[0] != '{' {
			errs = append(errs, Fieldf(f, "must be an object like {\"axes\": [\"x\"]}, not %s", jsonKind(b)))
			continue
		}
		if fe := decodeStrict(rd, &od, f, "axes, open, priority"); fe != nil {
			errs = append(errs, fe)
			continue
		}
		ds.Axes = refs(od.Axes, join(f, "axes"))
		if !isNull(od.Open) {
			if err := json.Unmarshal(od.Open, &ds.Open); err != nil {
				errs = append(errs, Fieldf(join(f, "open"), "must be a boolean, not %s", jsonKind(bytes.TrimSpace(od.Open))))
			}
		}
		if !isNull(od.Priority) {
			pf := join(f, "priority")
			txt := string(bytes.TrimSpace(od.Priority))
			n, err := strconv.ParseInt(txt, 10, 64)
			switch {
			case err != nil && (len(txt) == 0 || (txt[0] != '-' && (txt[0] < '0' || txt[0] > '9'))):
				errs = append(errs, Fieldf(pf, "must be an integer >= 0, not %s", jsonKind([]byte(txt))))
			case err != nil:
				errs = append(errs, Fieldf(pf, "%s is not an integer in 0..%d", txt, math.MaxInt32))
			case n < 0:
				errs = append(errs, Fieldf(pf, "priority %d is negative; priorities are >= 0 (0 is highest)", n))
			case n > math.MaxInt32:
				errs = append(errs, Fieldf(pf, "priority %d is too large; use 0..%d", n, math.MaxInt32))
			default:
				ds.Priority = int(n)
			}
		}
		s.Dims[d] = ds
	}
	s.Replicated = refs(o.Replicated, join(field, "replicated"))
	s.Unreduced = refs(o.Unreduced, join(field, "unreduced"))
	if len(errs) > 0 {
		return Sharding{}, errs
	}
	return finish(s, m, shape, pt)
}

func parseRefJSON(raw json.RawMessage, m *Mesh, field string) (AxisRef, error) {
	if isNull(raw) {
		return AxisRef{}, Fieldf(field, "must be an axis name string (\"x\" or \"x:(m)k\") or a mesh axis index, not null")
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		var i int
		if err2 := json.Unmarshal(raw, &i); err2 == nil {
			return refByIndex(i, m, field)
		}
		return AxisRef{}, Fieldf(field, "must be an axis name string (\"x\" or \"x:(m)k\") or a mesh axis index")
	}
	return ParseAxisRef(name, m, field)
}

func refByIndex(i int, m *Mesh, field string) (AxisRef, error) {
	if i < 0 || i >= len(m.Axes) {
		return AxisRef{}, Fieldf(field, "mesh axis index %d is out of range; the mesh has axes 0..%d (%s)", i, len(m.Axes)-1, m.axisNames())
	}
	return FullAxis(m.Axes[i]), nil
}

// jsonFieldError turns an encoding/json error into a field error under field.
func jsonFieldError(err error, field string) *FieldError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case asErr(err, &te):
		f := field
		if te.Field != "" {
			f = join(field, te.Field)
		}
		return Fieldf(f, "must be %s, not a JSON %s", jsonTypeName(te.Type.String()), te.Value)
	case asErr(err, &se):
		return Fieldf(field, "malformed JSON at offset %d: %v", se.Offset, se)
	}
	if name, ok := fielderr.UnknownJSONField(err); ok {
		return Fieldf(join(field, name), "unknown field; allowed fields are dims, replicated, unreduced, text (and axes, open, priority inside a dim)")
	}
	return Fieldf(field, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

func jsonTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "*int"), strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	}
	return "an object"
}

// ---- array (PartitionSpec-like) form ----

type arrPather struct {
	field  string
	single []bool // entry d was a bare string/int
}

func (p arrPather) whole() string              { return p.field }
func (p arrPather) dim(d int) (string, string) { return index(p.field, d), "" }
func (p arrPather) ref(pl place) (string, string) {
	if p.single[pl.dim] {
		return index(p.field, pl.dim), ""
	}
	return index(index(p.field, pl.dim), pl.k), ""
}

func parseArray(raw json.RawMessage, m *Mesh, shape []int64, field string) (Sharding, error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return Sharding{}, jsonFieldError(err, field)
	}
	pt := arrPather{field: field, single: make([]bool, len(entries))}
	s := Sharding{Dims: make([]DimSharding, len(entries))}
	var errs Errors
	for d, e := range entries {
		s.Dims[d].Priority = NoPriority
		e = bytes.TrimSpace(e)
		f := index(field, d)
		switch {
		case bytes.Equal(e, []byte("null")):
		case len(e) > 0 && e[0] == '[':
			if fe := tooManyRefs(m, arrayLen(e), f); fe != nil {
				errs = append(errs, fe)
				continue
			}
			var items []json.RawMessage
			if err := json.Unmarshal(e, &items); err != nil {
				errs = append(errs, Fieldf(f, "must be an array of axis names or mesh axis indices"))
				continue
			}
			for k, it := range items {
				r, err := parseRefJSON(it, m, index(f, k))
				if err != nil {
					errs = append(errs, err.(*FieldError))
					continue
				}
				s.Dims[d].Axes = append(s.Dims[d].Axes, r)
			}
		default:
			pt.single[d] = true
			if len(e) == 0 || (e[0] != '"' && e[0] != '-' && (e[0] < '0' || e[0] > '9')) {
				errs = append(errs, Fieldf(f, "must be null, an axis name, a mesh axis index, or an array of them, not %s", jsonKind(e)))
				continue
			}
			r, err := parseRefJSON(e, m, f)
			if err != nil {
				errs = append(errs, err.(*FieldError))
				continue
			}
			s.Dims[d].Axes = []AxisRef{r}
		}
	}
	if len(errs) > 0 {
		return Sharding{}, errs
	}
	s.Dims = padSpec(s.Dims, shape)
	for len(pt.single) < len(s.Dims) {
		pt.single = append(pt.single, true)
	}
	return finish(s, m, shape, pt)
}

// ---- Shardy text form ----

type textPather struct {
	field string
	dims  []int   // offset of each dim's '{'
	refs  [][]int // offsets of each dim's axes
	rep   []int
	unr   []int
}

func (p *textPather) whole() string { return p.field }
func (p *textPather) dim(d int) (string, string) {
	return p.field, fmt.Sprintf("at offset %d (dim %d): ", p.dims[d], d)
}
func (p *textPather) ref(pl place) (string, string) {
	var off int
	switch pl.list {
	case 0:
		off = p.refs[pl.dim][pl.k]
	case 1:
		off = p.rep[pl.k]
	default:
		off = p.unr[pl.k]
	}
	return p.field, fmt.Sprintf("at offset %d: ", off)
}

type textParser struct {
	s     string
	pos   int
	field string
	m     *Mesh
	// perValue: the text is a #sdy.sharding_per_value<[...]> of one value.
	perValue bool
}

func (p *textParser) fail(format string, args ...any) error {
	return Fieldf(p.field, "at offset %d: "+format, append([]any{p.pos}, args...)...)
}

func (p *textParser) skip() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n' || p.s[p.pos] == '\r') {
		p.pos++
	}
}

func (p *textParser) peek() byte {
	p.skip()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

// atEnd reports whether only whitespace is left. A NUL byte is text, not the end (peek
// answers 0 for both).
func (p *textParser) atEnd() bool {
	p.skip()
	return p.pos >= len(p.s)
}

func (p *textParser) expect(c byte) error {
	if p.peek() != c {
		if p.pos >= len(p.s) {
			return p.fail("expected '%c', found the end", c)
		}
		return p.fail("expected '%c', found '%c'", c, p.s[p.pos])
	}
	p.pos++
	return nil
}

func (p *textParser) number() (int, error) {
	p.skip()
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	if start == p.pos {
		return 0, p.fail("expected a number")
	}
	digits := p.s[start:p.pos]
	n, err := strconv.Atoi(digits)
	if err != nil || n > math.MaxInt32 {
		p.pos = start
		return 0, p.fail("number %s is too large; the largest accepted is %d", digits, math.MaxInt32)
	}
	return n, nil
}

// axis parses "x", "x":(m)k or "x:(m)k".
func (p *textParser) axis() (AxisRef, int, error) {
	p.skip()
	start := p.pos
	if err := p.expect('"'); err != nil {
		return AxisRef{}, start, err
	}
	end := strings.IndexByte(p.s[p.pos:], '"')
	if end < 0 {
		return AxisRef{}, start, p.fail("unterminated axis name")
	}
	name := p.s[p.pos : p.pos+end]
	p.pos += end + 1
	if p.pos < len(p.s) && p.s[p.pos] == ':' {
		q := p.pos
		p.pos++
		if err := p.expect('('); err != nil {
			return AxisRef{}, start, err
		}
		pre, err := p.number()
		if err != nil {
			return AxisRef{}, start, err
		}
		if err := p.expect(')'); err != nil {
			return AxisRef{}, start, err
		}
		size, err := p.number()
		if err != nil {
			return AxisRef{}, start, err
		}
		_ = q
		name = name + ":(" + strconv.Itoa(pre) + ")" + strconv.Itoa(size)
	}
	r, err := ParseAxisRef(name, p.m, p.field)
	if err != nil {
		fe := err.(*FieldError)
		return AxisRef{}, start, Fieldf(p.field, "at offset %d: %s", start, fe.Message)
	}
	return r, start, nil
}

func (p *textParser) axisList(close byte, allowOpen bool) (refs []AxisRef, offs []int, open bool, err error) {
	if p.peek() == close {
		p.pos++
		return nil, nil, false, nil
	}
	for {
		if allowOpen && p.peek() == '?' {
			p.pos++
			open = true
			if err := p.expect(close); err != nil {
				return nil, nil, false, err
			}
			return refs, offs, open, nil
		}
		r, off, err := p.axis()
		if err != nil {
			return nil, nil, false, err
		}
		refs = append(refs, r)
		offs = append(offs, off)
		switch p.peek() {
		case ',':
			p.pos++
		case close:
			p.pos++
			return refs, offs, false, nil
		default:
			return nil, nil, false, p.fail("expected ',' or '%c'", close)
		}
	}
}

// ParseText parses Shardy's textual form, with or without the sharding<@mesh, ...>
// wrapper, checks it for a tensor of the given shape (nil: any rank) on m and returns it
// in canonical form. Errors name field and carry the character offset.
func ParseText(text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	p := &textParser{s: text, field: field, m: m}
	pt := &textPather{field: field}
	wrapped, err := p.shardyWrapper()
	if err != nil {
		return Sharding{}, err
	}
	s := Sharding{}
	if err := p.shardyDims(&s, pt); err != nil {
		return Sharding{}, err
	}
	if err := p.shardyAxisSets(&s, pt); err != nil {
		return Sharding{}, err
	}
	if wrapped {
		if err := p.expect('>'); err != nil {
			return Sharding{}, err
		}
	}
	if p.perValue {
		if p.peek() == ',' {
			return Sharding{}, p.fail("a sdy.sharding_per_value of several values; give the sharding of one tensor")
		}
		if err := p.expect(']'); err != nil {
			return Sharding{}, err
		}
		if err := p.expect('>'); err != nil {
			return Sharding{}, err
		}
	}
	if !p.atEnd() {
		return Sharding{}, p.fail("unexpected %q after the sharding", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	return finish(s, m, shape, pt)
}

// shardyWrapper reads the "sharding<@mesh," that may open Shardy's text, checks that it
// names the request's mesh and reports whether it was there.
func (p *textParser) shardyWrapper() (bool, error) {
	switch c := p.peek(); {
	case c == '<': // the attribute's body as it stands in a module: <@mesh, [...]>
		p.pos++
	case c == '#' && strings.HasPrefix(p.s[p.pos:], "#sdy.sharding<"): // as as_text() prints it
		p.pos += len("#sdy.sharding<")
	case c == '#' && strings.HasPrefix(p.s[p.pos:], "#sdy.sharding_per_value<["): // an op's, of one value
		p.pos += len("#sdy.sharding_per_value<[")
		p.perValue = true
		if err := p.expect('<'); err != nil {
			return false, err
		}
	case c != 's':
		return false, nil
	case !strings.HasPrefix(p.s[p.pos:], "sharding<"):
		return false, p.fail("expected '[' or \"sharding<@mesh, [...]>\" (Shardy), '{' (an HLO sharding) or P(...) (a PartitionSpec)")
	default:
		p.pos += len("sharding<")
	}
	if err := p.expect('@'); err != nil {
		return false, err
	}
	start := p.pos
	for p.pos < len(p.s) && (isIdent(p.s[p.pos]) || p.s[p.pos] == '.') {
		p.pos++
	}
	name := p.s[start:p.pos]
	if name == "" {
		return false, p.fail("expected a mesh name after '@'")
	}
	if name != p.m.Name {
		p.pos = start
		return false, p.fail("sharding is bound to mesh @%s but the request's mesh is named %q; use @%s or rename the mesh", name, p.m.Name, p.m.Name)
	}
	if err := p.expect(','); err != nil {
		return false, err
	}
	return true, nil
}

// shardyDims reads the dims list "[{a}, {b, ?}p1]" into s, and the offsets into pt.
func (p *textParser) shardyDims(s *Sharding, pt *textPather) error {
	if err := p.expect('['); err != nil {
		return err
	}
	if p.peek() == ']' {
		p.pos++
		return nil
	}
	for {
		p.skip()
		pt.dims = append(pt.dims, p.pos)
		if err := p.expect('{'); err != nil {
			return err
		}
		refs, offs, open, err := p.axisList('}', true)
		if err != nil {
			return err
		}
		ds := DimSharding{Axes: refs, Open: open, Priority: NoPriority}
		if p.pos < len(p.s) && p.s[p.pos] == 'p' {
			p.pos++
			n, err := p.number()
			if err != nil {
				return err
			}
			ds.Priority = n
		}
		s.Dims = append(s.Dims, ds)
		pt.refs = append(pt.refs, offs)
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect(']'); err != nil {
			return p.fail("expected ',' or ']'")
		}
		return nil
	}
}

// shardyAxisSets reads the ", replicated={...}" and ", unreduced={...}" that may follow
// the dims into s, and the offsets into pt.
func (p *textParser) shardyAxisSets(s *Sharding, pt *textPather) error {
	for p.peek() == ',' {
		p.pos++
		p.skip()
		start := p.pos
		for p.pos < len(p.s) && isIdent(p.s[p.pos]) {
			p.pos++
		}
		key := p.s[start:p.pos]
		if key != "replicated" && key != "unreduced" {
			p.pos = start
			return p.fail("expected replicated={...} or unreduced={...}")
		}
		if err := p.expect('='); err != nil {
			return err
		}
		if err := p.expect('{'); err != nil {
			return err
		}
		refs, offs, _, err := p.axisList('}', false)
		if err != nil {
			return err
		}
		if key == "replicated" {
			s.Replicated = append(s.Replicated, refs...)
			pt.rep = append(pt.rep, offs...)
		} else {
			s.Unreduced = append(s.Unreduced, refs...)
			pt.unr = append(pt.unr, offs...)
		}
	}
	return nil
}

func isIdent(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// maxRefs is the most axis refs one list of a valid sharding on m can hold: each mesh
// axis once, or split into sub-axes of size >= 2 (at most log2 of its size of them).
func maxRefs(m *Mesh) int {
	n := 0
	for _, a := range m.Axes {
		n += max(1, bits.Len(uint(a.Size))-1)
	}
	return n
}

// tooManyRefs is the error of a list of n axis refs at field f that no valid sharding on
// m holds (nil when n is within maxRefs): a long list is rejected whole, not ref by ref.
func tooManyRefs(m *Mesh, n int, f string) *FieldError {
	if m == nil {
		return nil
	}
	if most := maxRefs(m); n > most {
		return Fieldf(f, "lists %d axes; on this mesh a sharding uses each axis or sub-axis once, so at most %d fit", n, most)
	}
	return nil
}

// arrayLen counts the elements of raw when it is a JSON array (0 otherwise), in one pass
// that copies nothing: a list far too long is refused before it is decoded. On malformed
// JSON the count is approximate (the decoder reports the error).
func arrayLen(raw []byte) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' {
		return 0
	}
	n, depth, empty := 0, 0, true
	for i := 1; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			empty = false
		case '[', '{':
			depth++
			empty = false
		case ']', '}':
			if depth == 0 {
				if !empty {
					n++
				}
				return n
			}
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		case ' ', '\t', '\n', '\r':
		default:
			empty = false
		}
	}
	return n
}
