package stablehlo

// Module is a parsed MLIR module: its sdy meshes and functions. Positions are byte
// offsets into Src.
type Module struct {
	Src    string
	Meshes []*MeshDecl
	Funcs  []*Func
	// BodyStart is where a declaration can be inserted at the top of the module's body
	// (after "module ... {", or 0 without a module op).
	BodyStart int
	// LocAliases are the #loc aliases ("loc3" for #loc3 = loc(...)): the text between
	// loc's parentheses.
	LocAliases map[string]string
}

// MeshDecl is `sdy.mesh @name = <["x"=2, "y"=4], device_ids=[...]>`.
type MeshDecl struct {
	Name      string
	Axes      []MeshAxis
	DeviceIDs []int
	Pos       int
}

// MeshAxis is one axis of a MeshDecl.
type MeshAxis struct {
	Name string
	Size int
}

// Func is a func.func: arguments and results with their types and attributes, and its
// body (nil for a declaration).
type Func struct {
	Name    string
	Pos     int
	Args    []*Param
	Results []*Param
	Body    *Region
	// ResultsParen: the result list is parenthesised; ResultsStart/End span the whole
	// result list (after "->") for rewriting it.
	ResultsParen             bool
	ResultsStart, ResultsEnd int
}

// Param is a function argument or result: its SSA name (arguments), type, attribute
// dictionary and where that dictionary is (or would go) in Src.
type Param struct {
	Name  string
	Type  Type
	Attrs Attrs
	// Dict is the span of the attribute dictionary {...}, or Dict.Start == Dict.End ==
	// the insertion point (right after the type) when there is none; Start -1 when the
	// text has no place for it (the generic form's arg_attrs).
	Dict Span
	// Loc is the text of its loc(...), without the parentheses ("" when none).
	Loc string
}

// Span is a byte range [Start, End) of Src.
type Span struct{ Start, End int }

// Attrs is an attribute dictionary: values by name and where each starts in Src.
type Attrs struct {
	Vals map[string]any
	Pos  map[string]int
	// KeySpan is the span of each entry ("name = value") for replacing it.
	KeySpan map[string]Span
}

func (a *Attrs) set(name string, v any, pos int, span Span) {
	if a.Vals == nil {
		a.Vals, a.Pos, a.KeySpan = map[string]any{}, map[string]int{}, map[string]Span{}
	}
	a.Vals[name] = v
	a.Pos[name] = pos
	a.KeySpan[name] = span
}

// Get returns the value of name and whether it is present.
func (a Attrs) Get(name string) (any, bool) {
	v, ok := a.Vals[name]
	return v, ok
}

// Type is a value's type. Tensor types with static dims have Shape and Elem; any other
// type (dynamic dims, tokens, tuples, scalars of non-tensor types) has Tensor false.
type Type struct {
	Tensor bool
	Shape  []int64
	Elem   string
	Text   string
}

// Region is a region's (first) block: its arguments and ops.
type Region struct {
	Args []*Param
	Ops  []*Op
	// Start is the offset right after the region's '{'.
	Start int
}

// funcType is a function type attribute: (args) -> results.
type funcType struct{ Args, Results []Type }

// Op is one operation, in either printed form.
type Op struct {
	Name     string // full op name: "stablehlo.add", "func.return"
	Pos      int
	Results  []string // SSA ids: "0", "1#0", "arg"
	Operands []string
	// Attrs merges keyword attributes of the pretty form, properties <{...}> and the
	// attribute dictionary; Flags are bare keywords (applies, across, GT) and
	// Positional other bare values (@callee, "name", dense<...>, <@mesh, [...]>).
	Attrs      Attrs
	Flags      []string
	Positional []positional
	// Inits are reduce's init values (pretty form "(%x init: %c)").
	Inits []string
	// Bindings are the pretty while's "(%iterArg = %x)" region argument names.
	Bindings    []string
	ResultTypes []Type
	Regions     []*Region
	// Dict is the attribute dictionary's span, or an empty span at the insertion point
	// (before the trailing type) when there is none.
	Dict Span
	// DictKeyword: a dictionary inserted at Dict needs the "attributes" keyword (the
	// pretty while prints it after its types).
	DictKeyword bool
	Generic     bool
	// Slice holds the pretty slice's [start:limit:stride, ...] ranges.
	Slice [][3]int64
	// Loc is the text of the op's loc(...), without the parentheses ("" when none).
	Loc string
}

// positional is a bare value in an op's pretty form with its position.
type positional struct {
	v   any
	pos int
}

// Raw is an attribute kept as text: dialect attributes (#sdy.sharding<...>), types and
// anything not interpreted.
type Raw struct{ Text string }

// Symbol is a symbol reference (@name).
type Symbol struct{ Name string }
