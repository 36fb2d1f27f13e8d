package stablehlo

import (
	"strconv"
	"strings"
)

// Location is where an op came from, as its loc(...) says: the source file and line of
// the first file location in it (a call site's callee before its caller, a fused
// location's first part), and the name of its outermost name location (JAX prints the
// op's path there: "jit(f)/jit(main)/dot_general").
type Location struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	Name   string `json:"op_name,omitempty"`
}

// IsZero reports whether l says nothing.
func (l Location) IsZero() bool { return l == Location{} }

// maxLocDepth bounds the nesting of locations and alias chains ResolveLoc follows.
const maxLocDepth = 32

// ResolveLoc reads the text of a loc(...) (without its parentheses), following #loc
// aliases of m. Forms: unknown, #alias, "file":line:col (with an optional "to" range),
// "name" and "name"(child), callsite(callee at caller), fused[...] and fused<...>[...].
// What it does not read is skipped; it never fails.
func (m *Module) ResolveLoc(text string) Location {
	var l Location
	r := locReader{m: m}
	r.read(text, &l, 0)
	return l
}

type locReader struct{ m *Module }

// read fills the unset fields of l from text.
func (r *locReader) read(text string, l *Location, depth int) {
	text = strings.TrimSpace(text)
	if depth > maxLocDepth || text == "" {
		return
	}
	switch {
	case text[0] == '#':
		if r.m != nil {
			name := text[1:]
			if i := strings.IndexAny(name, " ,)]"); i >= 0 {
				name = name[:i]
			}
			if a, ok := r.m.LocAliases[name]; ok {
				r.read(a, l, depth+1)
			}
		}
	case text[0] == '"':
		s, rest, ok := cutQuoted(text)
		if !ok {
			return
		}
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(rest, ":"):
			if l.File == "" && s != "" { // an empty file name says nothing
				l.File = s
				line, col := lineColOf(rest[1:])
				l.Line, l.Column = line, col
			}
		case strings.HasPrefix(rest, "("):
			if l.Name == "" {
				l.Name = s
			}
			inner, _ := cutBalanced(rest)
			r.read(inner, l, depth+1)
		default:
			if l.Name == "" {
				l.Name = s
			}
		}
	case strings.HasPrefix(text, "callsite("):
		inner, _ := cutBalanced(text[len("callsite"):])
		for _, part := range splitLoc(inner, " at ") {
			r.read(part, l, depth+1)
		}
	case strings.HasPrefix(text, "fused"):
		rest := text[len("fused"):]
		if strings.HasPrefix(rest, "<") {
			if i := strings.Index(rest, ">"); i >= 0 {
				rest = rest[i+1:]
			}
		}
		inner, _ := cutBalanced(strings.TrimSpace(rest))
		for _, part := range splitLoc(inner, ",") {
			r.read(part, l, depth+1)
		}
	}
}

// cutQuoted splits a leading "..." string (escapes read as Go's) from the rest.
func cutQuoted(s string) (string, string, bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, err := strconv.Unquote(s[:i+1])
			if err != nil {
				v = s[1:i]
			}
			return v, s[i+1:], true
		}
	}
	return "", "", false
}

// cutBalanced takes a bracketed group at the start of s and returns its inside.
func cutBalanced(s string) (string, string) {
	if s == "" {
		return "", ""
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			if _, rest, ok := cutQuoted(s[i:]); ok {
				i = len(s) - len(rest) - 1
			}
		case '(', '[', '{', '<':
			depth++
		case ')', ']', '}', '>':
			depth--
			if depth == 0 {
				return s[1:i], s[i+1:]
			}
		}
	}
	return s[1:], ""
}

// splitLoc splits s on sep outside brackets and strings.
func splitLoc(s, sep string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			if _, rest, ok := cutQuoted(s[i:]); ok {
				i = len(s) - len(rest) - 1
			}
		case c == '(' || c == '[' || c == '{' || c == '<':
			depth++
		case c == ')' || c == ']' || c == '}' || c == '>':
			depth--
		case depth == 0 && strings.HasPrefix(s[i:], sep):
			out = append(out, s[start:i])
			start = i + len(sep)
			i = start - 1
		}
	}
	return append(out, s[start:])
}

// lineColOf reads "12:5" (and ignores a trailing " to ..." range).
func lineColOf(s string) (int, int) {
	num := func(s string) (int, string) {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, _ := strconv.Atoi(s[:i])
		return n, s[i:]
	}
	line, rest := num(s)
	col := 0
	if strings.HasPrefix(rest, ":") {
		col, _ = num(rest[1:])
	}
	return line, col
}

// OpLocation is the location of the op named name in the graph (an op is named by its
// first result), read from its loc(...); false when the op has none that says anything.
func (imp *Import) OpLocation(name string) (Location, bool) {
	op := imp.opOf[name]
	if op == nil || op.Loc == "" {
		return Location{}, false
	}
	l := imp.Module.ResolveLoc(op.Loc)
	return l, !l.IsZero()
}

// OpLine is the 1-based source line of the op named name in the module text (0 when
// the graph has no such op).
func (imp *Import) OpLine(name string) int {
	op := imp.opOf[name]
	if op == nil {
		return 0
	}
	line, _ := imp.lineCol(op.Pos)
	return line
}
