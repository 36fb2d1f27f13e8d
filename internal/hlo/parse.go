package hlo

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Field is the wire field every module error names.
const Field = "hlo_module"

// Limits bound what Parse accepts. Zero fields take DefaultLimits' values.
type Limits struct {
	// MaxInstructions bounds the instructions of all computations together.
	MaxInstructions int
	// MaxDevices bounds num_partitions and every device id a collective lists.
	MaxDevices int
}

// DefaultLimits are generous for real compiled programs.
func DefaultLimits() Limits { return Limits{MaxInstructions: 400000, MaxDevices: 65536} }

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxInstructions <= 0 {
		l.MaxInstructions = d.MaxInstructions
	}
	if l.MaxDevices <= 0 {
		l.MaxDevices = d.MaxDevices
	}
	return l
}

// Module is a parsed HloModule.
type Module struct {
	Name          string
	NumPartitions int // 1 when the header does not say
	NumReplicas   int // 1 when the header does not say
	// CountsGiven: the header gives num_partitions or replica_count; without them
	// Analyze infers the devices from the replica groups, device ids and shardings.
	CountsGiven bool
	// ReplicasGiven: the header gives replica_count (torch_xla and some JAX dumps print
	// num_partitions alone, or neither).
	ReplicasGiven bool
	// EntryImplied: no computation is marked ENTRY; the last one is the entry, as XLA's
	// parser takes it.
	EntryImplied bool
	Computations []*Computation
	Entry        *Computation
	Src          string
	// Frames are the module's stack-frame tables (FileNames, FunctionNames,
	// FileLocations, StackFrames) that metadata's stack_frame_id points into.
	Frames Frames
	// lines holds the offset of every line start, for LineCol in O(log n).
	lines []int
	// byName indexes Computations.
	byName map[string]*Computation
}

// LineCol gives the 1-based line and column (in bytes) of offset off in the module's
// text, in time logarithmic in its length.
func (m *Module) LineCol(off int) (line, col int) {
	if m.lines == nil {
		m.lines = lineStarts(m.Src)
	}
	off = min(max(off, 0), len(m.Src))
	i := sort.SearchInts(m.lines, off+1) - 1 // the last line start <= off
	return i + 1, off - m.lines[i] + 1
}

func lineStarts(src string) []int {
	out := []int{0}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			out = append(out, i+1)
		}
	}
	return out
}

// Computation returns the computation named name (without '%'), or nil.
func (m *Module) Computation(name string) *Computation {
	name = strings.TrimPrefix(strings.TrimSpace(name), "%")
	if m.byName == nil {
		m.byName = make(map[string]*Computation, len(m.Computations))
		for _, c := range m.Computations {
			if _, dup := m.byName[c.Name]; !dup {
				m.byName[c.Name] = c
			}
		}
	}
	return m.byName[name]
}

// Computation is one HLO computation: the entry or a fused, reducer or called one.
type Computation struct {
	Name   string
	Entry  bool
	Instrs []*Instr
	Pos    int
	// ExecutionThread is the computation's execution_thread= ("" for the main one).
	ExecutionThread string
	byName          map[string]*Instr
}

// Instr returns the instruction of c named name (without '%'), or nil.
func (c *Computation) Instr(name string) *Instr { return c.byName[name] }

// Instr is one instruction: "[ROOT] %name = shape opcode(operands), attr=value, ...".
type Instr struct {
	Name     string
	Root     bool
	Shape    Shape
	Opcode   string
	Operands []string // instruction names without '%'
	// Typed: the instruction prints its shape (XLA's parser infers it otherwise, and so
	// does Parse for get-tuple-element, tuple and elementwise ops).
	Typed bool
	// Args is the raw text between the opcode's parentheses (constant literals,
	// parameter numbers).
	Args string
	// Attrs are the attributes' raw values ("{1}", "[4,2]<=[8]", "%fused_computation").
	Attrs map[string]string
	// Pos is the byte offset of the instruction; AttrPos of each attribute value.
	Pos     int
	AttrPos map[string]int
}

// Attr returns the raw value of the named attribute and whether it is present.
func (in *Instr) Attr(name string) (string, bool) {
	v, ok := in.Attrs[name]
	return v, ok
}

// Shape is an array shape (Elem and Dims) or a tuple (Tuple non-nil).
type Shape struct {
	Elem  string
	Dims  []int64
	Tuple []Shape
}

// IsTuple reports whether s is a tuple shape.
func (s Shape) IsTuple() bool { return s.Tuple != nil }

// Elements is the element count of an array shape (1 for a scalar, 0 for a tuple).
func (s Shape) Elements() int64 {
	if s.IsTuple() {
		return 0
	}
	n := int64(1)
	for _, d := range s.Dims {
		n *= d
	}
	return n
}

// Bytes is the buffer size of s: the sum of a tuple's elements, element bits times
// elements for an array (sub-byte types rounded up per buffer; token and opaque types
// hold nothing).
func (s Shape) Bytes() int64 {
	if s.IsTuple() {
		var b int64
		for _, t := range s.Tuple {
			b += t.Bytes()
		}
		return b
	}
	return sharding.BufferBytes(s.Elements(), ElemBits(s.Elem))
}

// ElemBits is the size in bits of an HLO element type (0 for token and opaque types and
// types it does not know).
func ElemBits(elem string) int {
	if b, ok := sharding.DTypeBits(elem); ok {
		return b
	}
	switch {
	case strings.HasPrefix(elem, "f8"):
		return 8
	case strings.HasPrefix(elem, "f4"), strings.HasPrefix(elem, "s4"), strings.HasPrefix(elem, "u4"):
		return 4
	case elem == "s2" || elem == "u2":
		return 2
	case elem == "s1" || elem == "u1":
		return 1
	}
	return 0
}

type parser struct {
	ctx context.Context
	src string
	pos int
	lim Limits
	n   int // instructions so far
	err error
}

// ParseContext reads the text of a compiled HLO module as XLA prints it (JAX's
// jax.jit(f).lower(x).compile().as_text(), or an --xla_dump_to file): the HloModule
// header, then computations of instructions. Every error is a *fielderr.FieldError on
// Field whose message starts with "line L, column C", or ctx's error when ctx ends
// first. It never panics and runs in time linear in len(src).
func ParseContext(ctx context.Context, src string, lim Limits) (*Module, error) {
	p := &parser{ctx: ctx, src: src, lim: lim.withDefaults()}
	m := p.module()
	if p.err != nil {
		return nil, p.err
	}
	m.lines = lineStarts(src)
	m.Computation("") // index the computations now: a parsed module is read-only
	return m, nil
}

// LineCol gives the 1-based line and column (in bytes) of offset off in src. It scans
// src up to off: for many positions in one module use (*Module).LineCol.
func LineCol(src string, off int) (line, col int) {
	off = min(max(off, 0), len(src))
	line = 1 + strings.Count(src[:off], "\n")
	return line, off - (strings.LastIndexByte(src[:off], '\n') + 1) + 1
}

func (p *parser) failAt(pos int, format string, args ...any) {
	if p.err != nil {
		return
	}
	line, col := p.lineCol(pos)
	p.err = fielderr.New(Field, "line %d, column %d: "+format, append([]any{line, col}, args...)...)
}

// lineCol is LineCol for the parser's text; an error is reported once, so the scan is
// paid once.
func (p *parser) lineCol(pos int) (int, int) { return LineCol(p.src, pos) }

func (p *parser) fail(format string, args ...any) { p.failAt(p.pos, format, args...) }

// space skips blanks, newlines, /*...*/ and // comments.
func (p *parser) space() { p.skip(true) }

// lineSpace skips blanks and comments without leaving the line.
func (p *parser) lineSpace() { p.skip(false) }

func (p *parser) skip(newlines bool) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' && newlines:
			p.pos++
		case strings.HasPrefix(p.src[p.pos:], "/*"):
			end := strings.Index(p.src[p.pos+2:], "*/")
			if end < 0 {
				p.fail("unclosed comment")
				p.pos = len(p.src)
				return
			}
			p.pos += end + 4
		case strings.HasPrefix(p.src[p.pos:], "//"):
			end := strings.IndexByte(p.src[p.pos:], '\n')
			if end < 0 {
				p.pos = len(p.src)
				return
			}
			p.pos += end
		default:
			return
		}
	}
}

// continues reports whether, past blanks, newlines and comments, the text goes on with
// c (an instruction split over lines); it leaves the cursor there if so.
func (p *parser) continues(c byte) bool {
	save := p.pos
	p.space()
	if p.peek() == c {
		return true
	}
	p.pos = save
	return false
}

func (p *parser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *parser) accept(c byte) bool {
	if p.peek() == c {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(c byte, what string) bool {
	if p.accept(c) {
		return true
	}
	p.fail("expected '%c' %s, found %s", c, what, p.found())
	return false
}

// found describes the text at the cursor for an error message.
func (p *parser) found() string {
	if p.pos >= len(p.src) {
		return "the end of the text"
	}
	end := p.pos
	for end < len(p.src) && end-p.pos < 20 && p.src[end] != '\n' {
		end++
	}
	if end == p.pos {
		return "the end of the line"
	}
	return strconv.Quote(p.src[p.pos:end])
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// ident reads a name: letters, digits, '_', '.', '-'.
func (p *parser) ident() string {
	start := p.pos
	for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// valueName reads "%name" or "name".
func (p *parser) valueName() string {
	p.accept('%')
	return p.ident()
}

func (p *parser) module() *Module {
	m := &Module{Src: p.src, NumPartitions: 1, NumReplicas: 1}
	p.space()
	if !strings.HasPrefix(p.src[p.pos:], "HloModule") && p.startsComputation() && !p.looksLikeMLIR() {
		// XLA's parser takes a module without its header line (its tests do).
		return p.body(m)
	}
	if !strings.HasPrefix(p.src[p.pos:], "HloModule") {
		if p.looksLikeMLIR() {
			p.fail("this is MLIR (StableHLO) text, not a compiled HLO module: post it as \"module\" or with Content-Type application/mlir")
		} else {
			p.fail("expected \"HloModule name, ...\" (the text of jax.jit(f).lower(x).compile().as_text()), found %s", p.found())
		}
		return nil
	}
	p.pos += len("HloModule")
	p.lineSpace()
	m.Name = p.ident()
	if m.Name == "" {
		p.fail("expected the module's name after HloModule, found %s", p.found())
		return nil
	}
	p.attributes("in the HloModule header", func(key string, valPos int, val string) {
		switch key {
		case "num_partitions", "replica_count", "num_replicas":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > p.lim.MaxDevices {
				p.failAt(valPos, "%s must be an integer from 1 to %d, got %q", key, p.lim.MaxDevices, val)
				return
			}
			m.CountsGiven = true
			if key == "num_partitions" {
				m.NumPartitions = n
			} else {
				m.NumReplicas, m.ReplicasGiven = n, true
			}
		}
	})
	if p.err != nil {
		return nil
	}
	return p.body(m)
}

// body reads the stack-frame tables and computations after the header.
func (p *parser) body(m *Module) *Module {
	for p.err == nil {
		p.space()
		if p.pos >= len(p.src) {
			break
		}
		if p.frameTable(&m.Frames) {
			continue
		}
		c := p.computation()
		if c == nil {
			break
		}
		m.Computations = append(m.Computations, c)
		if c.Entry {
			if m.Entry != nil {
				p.failAt(c.Pos, "a second ENTRY computation (%%%s); a module has one", c.Name)
				return nil
			}
			m.Entry = c
		}
	}
	if p.err != nil {
		return nil
	}
	if m.Entry == nil {
		if len(m.Computations) == 0 {
			p.fail("the module has no computations")
			return nil
		}
		// Without ENTRY, XLA's parser takes the last computation as the entry.
		m.Entry = m.Computations[len(m.Computations)-1]
		m.Entry.Entry = true
		m.EntryImplied = true
	}
	return m
}

func (p *parser) looksLikeMLIR() bool {
	head := p.src[p.pos:min(len(p.src), p.pos+4096)]
	return strings.HasPrefix(head, "module") || strings.HasPrefix(head, "#loc") || strings.HasPrefix(head, "func.func") ||
		strings.Contains(head, "stablehlo.") || strings.Contains(head, "sdy.mesh")
}

// computation parses "[ENTRY] %name [(params) -> shape] { instructions }
// [, execution_thread="..."]".
func (p *parser) computation() *Computation {
	c := &Computation{Pos: p.pos, byName: map[string]*Instr{}}
	if strings.HasPrefix(p.src[p.pos:], "ENTRY") && !isNameChar(p.at(p.pos+5)) {
		c.Entry = true
		p.pos += 5
		p.lineSpace()
	}
	namePos := p.pos
	c.Name = p.valueName()
	if c.Name == "" {
		p.failAt(namePos, "expected a computation (\"%%name (params) -> shape {\"), found %s", p.found())
		return nil
	}
	p.space()
	if p.peek() == '(' {
		p.balanced()
		p.space()
	}
	if strings.HasPrefix(p.src[p.pos:], "->") {
		p.pos += 2
		p.space()
		p.shape()
		p.space()
	}
	if p.err != nil {
		return nil
	}
	if !p.expect('{', "opening the computation's body") {
		return nil
	}
	for p.err == nil {
		p.space()
		if p.accept('}') {
			p.attributes("after computation %"+c.Name, func(key string, _ int, val string) {
				if key == "execution_thread" {
					c.ExecutionThread, _ = strconv.Unquote(val)
				}
			})
			c.inferShapes()
			return c
		}
		if p.pos >= len(p.src) {
			p.fail("computation %%%s (line %d) is not closed by '}'", c.Name, firstLine(p, c.Pos))
			return nil
		}
		if p.startsComputation() {
			p.fail("expected '}' closing computation %%%s (line %d) before the next computation", c.Name, firstLine(p, c.Pos))
			return nil
		}
		in := p.instr()
		if in == nil {
			return nil
		}
		if _, dup := c.byName[in.Name]; dup {
			p.failAt(in.Pos, "instruction %%%s is defined twice in %%%s", in.Name, c.Name)
			return nil
		}
		c.byName[in.Name] = in
		c.Instrs = append(c.Instrs, in)
	}
	return nil
}

func firstLine(p *parser, pos int) int {
	l, _ := p.lineCol(pos)
	return l
}

// startsComputation reports whether the line at the cursor opens a computation
// ("ENTRY ..." or "%name (params) -> shape {", "name {") rather than an instruction.
func (p *parser) startsComputation() bool {
	end := strings.IndexByte(p.src[p.pos:], '\n')
	if end < 0 {
		end = len(p.src) - p.pos
	}
	line := strings.TrimSpace(p.src[p.pos : p.pos+end])
	if strings.HasPrefix(line, "ENTRY ") {
		return true
	}
	return strings.HasSuffix(line, "{") && !strings.Contains(line, "=")
}

// frameTable reads one of the stack-frame tables JAX prints after the header
// (FileNames, FunctionNames, FileLocations, StackFrames): lines "N value". It reports
// false, leaving the cursor, when the text there is not one.
func (p *parser) frameTable(f *Frames) bool {
	save := p.pos
	name := p.ident()
	kind := -1
	for i, t := range frameTables {
		if name == t {
			kind = i
		}
	}
	if kind < 0 || p.peek() != '\n' && p.peek() != '\r' && p.peek() != ' ' {
		p.pos = save
		return false
	}
	for p.err == nil {
		p.space()
		if c := p.peek(); c < '0' || c > '9' {
			return true
		}
		idPos := p.pos
		id, _ := strconv.Atoi(p.ident())
		p.lineSpace()
		valPos := p.pos
		var val string
		switch p.peek() {
		case '"':
			p.pos++
			p.skipString(valPos)
			val = p.src[valPos:p.pos]
		case '{':
			p.balanced()
			val = p.src[valPos:p.pos]
		default:
			p.failAt(valPos, "expected a quoted name or {key=value ...} after %s entry %d, found %s", name, id, p.found())
			return true
		}
		if err := f.add(kind, id, val); err != nil {
			p.failAt(idPos, "%s entry %d: %v", name, id, err)
		}
	}
	return true
}

func (p *parser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

// instr parses one instruction, which may span several lines: "[ROOT] %name = [shape]
// opcode(operands), attr=value, ...".
func (p *parser) instr() *Instr {
	in := &Instr{Pos: p.pos}
	p.n++
	if p.n%1024 == 0 && p.err == nil {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			return nil
		}
	}
	if p.n > p.lim.MaxInstructions {
		p.fail("the module has more than %d instructions (SHARDPLAN_MAX_GRAPH_OPS)", p.lim.MaxInstructions)
		return nil
	}
	if strings.HasPrefix(p.src[p.pos:], "ROOT") && !isNameChar(p.at(p.pos+4)) {
		in.Root = true
		p.pos += 4
		p.lineSpace()
	}
	if p.peek() != '%' && !isNameChar(p.peek()) {
		p.fail("expected an instruction (\"%%name = shape opcode(operands)\"), found %s", p.found())
		return nil
	}
	in.Name = p.valueName()
	p.space()
	if !p.expect('=', "after the instruction's name") {
		return nil
	}
	p.space()
	// A shape ("f32[8]", "(f32[2], s32[])") or, when XLA's parser is to infer it, the
	// opcode itself.
	typeStart := p.pos
	if p.peek() != '(' {
		word := p.ident()
		p.pos = typeStart
		if word == "" || p.at(typeStart+len(word)) != '(' {
			in.Shape, in.Typed = p.shape(), true
		}
	} else {
		in.Shape, in.Typed = p.shape(), true
	}
	if p.err != nil {
		return nil
	}
	p.space()
	opPos := p.pos
	in.Opcode = p.ident()
	if in.Opcode == "" {
		p.failAt(opPos, "expected an opcode after the shape, found %s", p.found())
		return nil
	}
	if !knownOpcode(in.Opcode) {
		p.failAt(opPos, "unknown opcode %q: XLA prints none by that name (check its spelling)", clip(in.Opcode))
		return nil
	}
	if p.peek() != '(' {
		p.fail("expected '(' after opcode %s, found %s", in.Opcode, p.found())
		return nil
	}
	argsStart := p.pos + 1
	p.balanced()
	if p.err != nil {
		return nil
	}
	in.Args = p.src[argsStart : p.pos-1]
	if in.Opcode != "constant" {
		in.Operands = operandNames(in.Args)
	}
	p.attributes("after ',' in %"+in.Name, func(key string, pos int, val string) {
		if in.Attrs == nil {
			in.Attrs, in.AttrPos = map[string]string{}, map[string]int{}
		}
		in.AttrPos[key], in.Attrs[key] = pos, val
	})
	if p.err != nil {
		return nil
	}
	p.lineSpace()
	if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '}' {
		p.fail("unexpected %s after instruction %%%s", p.found(), in.Name)
		return nil
	}
	return in
}

// attributes reads ", key=value" pairs, which may continue on the next lines, giving
// each value and where it starts to each; where names the place in errors.
func (p *parser) attributes(where string, each func(key string, pos int, val string)) {
	for p.err == nil {
		p.lineSpace()
		if !p.accept(',') && !p.continues(',') {
			return
		}
		p.accept(',')
		p.space()
		keyPos := p.pos
		key := p.ident()
		if key == "" || !p.accept('=') {
			p.failAt(keyPos, "expected key=value %s, found %s", where, p.found())
			return
		}
		pos := p.pos
		each(key, pos, p.attrValue())
	}
}

// operandNames reads the names of an operand list: "%a, %b", "f32[2]{0} %a, f32[2] %b",
// "a, b" or "(f32[2], s32[]) %t". Each operand is the last word of its comma-separated
// part (commas inside brackets, strings and comments do not split).
func operandNames(args string) []string {
	var out []string
	add := func(part string) {
		part = stripComments(part)
		part = strings.TrimSpace(part)
		if i := strings.LastIndexAny(part, " \t\n\r}])"); i >= 0 {
			part = part[i+1:]
		}
		part = strings.TrimPrefix(part, "%")
		if part == "" {
			return
		}
		for i := 0; i < len(part); i++ {
			if !isNameChar(part[i]) {
				return
			}
		}
		out = append(out, part)
	}
	depth, start := 0, 0
	for i := 0; i < len(args); i++ {
		switch c := args[i]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case '"':
			for i++; i < len(args) && args[i] != '"'; i++ {
				if args[i] == '\\' {
					i++
				}
			}
		case '/':
			if i+1 < len(args) && args[i+1] == '*' {
				if end := strings.Index(args[i+2:], "*/"); end >= 0 {
					i += end + 3
				}
			}
		case ',':
			if depth == 0 {
				add(args[start:i])
				start = i + 1
			}
		}
	}
	add(args[start:])
	return out
}

// stripComments removes /*...*/ comments.
func stripComments(s string) string {
	for {
		i := strings.Index(s, "/*")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i+2:], "*/")
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + " " + s[i+2+j+2:]
	}
}

// shape parses "f32[8,128]{1,0}", "f32[1, 1024]", "u32[]", "(f32[2]{0}, /*index=1*/s32[])",
// "token[]", "f32[8]{1,0:T(8,128)}".
func (p *parser) shape() Shape {
	if p.accept('(') {
		s := Shape{Tuple: []Shape{}}
		for p.err == nil {
			p.space()
			if p.accept(')') {
				return s
			}
			if len(s.Tuple) > 0 {
				if !p.expect(',', "between tuple elements") {
					return s
				}
				p.space()
			}
			s.Tuple = append(s.Tuple, p.shape())
		}
		return s
	}
	start := p.pos
	for p.pos < len(p.src) && (p.src[p.pos] >= 'a' && p.src[p.pos] <= 'z' || p.src[p.pos] >= '0' && p.src[p.pos] <= '9') {
		p.pos++
	}
	s := Shape{Elem: p.src[start:p.pos]}
	if s.Elem == "" || s.Elem[0] < 'a' || s.Elem[0] > 'z' {
		p.failAt(start, "expected a shape (f32[8,128], (f32[2], s32[]), token[]), found %s", p.found())
		return s
	}
	if !p.expect('[', "opening the shape's dims") {
		return s
	}
	s.Dims = []int64{}
	for p.err == nil {
		p.lineSpace()
		if p.accept(']') {
			break
		}
		if len(s.Dims) > 0 {
			if !p.expect(',', "between dims") {
				return s
			}
			p.lineSpace()
		}
		p.accept('<') // bounded dynamic dims print as <=N
		p.accept('=')
		p.accept('?')
		dpos := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		d, err := strconv.ParseInt(p.src[dpos:p.pos], 10, 64)
		if err != nil || d > 1<<40 {
			p.failAt(dpos, "expected a dim size (an integer up to 2^40), found %s", p.found())
			return s
		}
		s.Dims = append(s.Dims, d)
	}
	if p.peek() == '{' { // layout, with tiling and memory space: {1,0:T(8,128)S(1)}
		p.balanced()
	}
	return s
}

// balanced skips a bracketed group ('(', '[' or '{') and the strings inside it. It is
// iterative, so deep nesting costs no stack.
func (p *parser) balanced() {
	start := p.pos
	depth := 0
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case '"':
			p.pos++
			p.skipString(p.pos - 1)
			if p.err != nil {
				return
			}
			continue
		}
		p.pos++
		if depth == 0 {
			return
		}
	}
	p.failAt(start, "unclosed '%c'", p.src[start])
}

// skipString skips the rest of a "..." string (the cursor is after its opening quote).
func (p *parser) skipString(start int) {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '\\':
			p.pos += 2
			continue
		case '"':
			p.pos++
			return
		case '\n':
			p.failAt(start, "unterminated string")
			return
		}
		p.pos++
	}
	p.failAt(start, "unterminated string")
}

// attrValue reads an attribute value up to the next ',' or end of line outside
// brackets and strings, and returns it trimmed. A value may be followed by more of
// itself after blanks (replica_groups=mesh['x'=8] {'x'}).
func (p *parser) attrValue() string {
	start := p.pos
	for p.pos < len(p.src) && p.err == nil {
		c := p.src[p.pos]
		switch c {
		case '(', '[', '{':
			p.balanced()
			continue
		case '"':
			p.pos++
			p.skipString(p.pos - 1)
			continue
		case ',', '\n', ')', ']', '}':
			return strings.TrimSpace(p.src[start:p.pos])
		}
		p.pos++
	}
	return strings.TrimSpace(p.src[start:p.pos])
}

// inferShapes gives the instructions printed without a shape the one XLA's parser
// infers for the ops whose buffers the audit reads: get-tuple-element (the operand's
// element), tuple (its operands'), and elementwise and other ops (their first
// operand's); anything else keeps an empty shape.
func (c *Computation) inferShapes() {
	for _, in := range c.Instrs {
		if in.Typed {
			continue
		}
		var ops []*Instr
		for _, name := range in.Operands {
			if d := c.byName[name]; d != nil {
				ops = append(ops, d)
			}
		}
		switch {
		case in.Opcode == "tuple":
			t := Shape{Tuple: []Shape{}}
			for _, d := range ops {
				t.Tuple = append(t.Tuple, d.Shape)
			}
			in.Shape = t
		case in.Opcode == "get-tuple-element" && len(ops) == 1:
			if i, err := strconv.Atoi(strings.TrimSpace(in.Attrs["index"])); err == nil && i >= 0 && i < len(ops[0].Shape.Tuple) {
				in.Shape = ops[0].Shape.Tuple[i]
			}
		case in.Opcode == "compare" && len(ops) > 0:
			in.Shape = Shape{Elem: "pred", Dims: ops[0].Shape.Dims}
		case len(ops) > 0:
			in.Shape = ops[0].Shape
		}
	}
}
