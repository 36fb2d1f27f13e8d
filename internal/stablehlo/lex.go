package stablehlo

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // bare-id: stablehlo.add, tensor, x, GT
	tValue          // %name or %name#k (text without '%')
	tSymbol         // @name or @"name" (text without '@')
	tHash           // #alias or #dialect.attr (text without '#')
	tBang           // !type.alias (text without '!')
	tCaret          // ^bb0 (text without '^')
	tInt            // 12, -3, 0x1F
	tFloat          // 1.5, -2.0e+00
	tString         // "..." (text unquoted)
	tArrow          // ->
	tPunct          // one of ( ) [ ] { } < > , = : ? * + |
)

type token struct {
	kind tokKind
	text string
	pos  int  // byte offset of the token's first character
	nl   bool // a newline separates it from the previous token
}

func (t token) is(p string) bool { return t.kind == tPunct && t.text == p }

// lexer turns MLIR text into tokens on demand. It never fails: an unexpected character
// becomes a tPunct token the parser rejects with its position.
type lexer struct {
	src string
	pos int
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$' || c == '.'
}

func isSuffixChar(c byte) bool {
	return isIdentChar(c) || c == '-'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipSpace skips whitespace and // comments, reporting whether it crossed a newline.
func (l *lexer) skipSpace() bool {
	nl := false
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			nl = true
			l.pos++
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '/':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		default:
			return nl
		}
	}
	return nl
}

func (l *lexer) next() token {
	nl := l.skipSpace()
	start := l.pos
	tok := func(k tokKind, text string) token { return token{kind: k, text: text, pos: start, nl: nl} }
	if l.pos >= len(l.src) {
		return tok(tEOF, "")
	}
	c := l.src[l.pos]
	switch {
	case isIdentStart(c):
		for l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
			l.pos++
		}
		return tok(tIdent, l.src[start:l.pos])
	case c == '%' || c == '@' || c == '#' || c == '!' || c == '^':
		l.pos++
		kind := map[byte]tokKind{'%': tValue, '@': tSymbol, '#': tHash, '!': tBang, '^': tCaret}[c]
		if (c == '@' || c == '%') && l.pos < len(l.src) && l.src[l.pos] == '"' {
			s, _ := l.quoted()
			return tok(kind, s)
		}
		b := l.pos
		for l.pos < len(l.src) && isSuffixChar(l.src[l.pos]) {
			l.pos++
		}
		name := l.src[b:l.pos]
		if c == '%' && l.pos+1 < len(l.src) && l.src[l.pos] == '#' && isDigit(l.src[l.pos+1]) {
			l.pos++
			for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
				l.pos++
			}
			name = l.src[b:l.pos]
		}
		if name == "" {
			return tok(tPunct, string(c))
		}
		return tok(kind, name)
	case c == '"':
		s, _ := l.quoted()
		return tok(tString, s)
	case isDigit(c) || (c == '-' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1])):
		return l.number(start, nl)
	case c == '-' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '>':
		l.pos += 2
		return tok(tArrow, "->")
	}
	l.pos++
	return tok(tPunct, string(c))
}

func (l *lexer) number(start int, nl bool) token {
	if l.src[l.pos] == '-' {
		l.pos++
	}
	if strings.HasPrefix(l.src[l.pos:], "0x") {
		l.pos += 2
		for l.pos < len(l.src) && strings.IndexByte("0123456789abcdefABCDEF", l.src[l.pos]) >= 0 {
			l.pos++
		}
		return token{kind: tInt, text: l.src[start:l.pos], pos: start, nl: nl}
	}
	for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
		l.pos++
	}
	kind := tInt
	if l.pos+1 < len(l.src) && l.src[l.pos] == '.' && isDigit(l.src[l.pos+1]) {
		kind = tFloat
		l.pos++
		for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
			l.pos++
		}
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'e' || l.src[l.pos] == 'E') {
		p := l.pos + 1
		if p < len(l.src) && (l.src[p] == '+' || l.src[p] == '-') {
			p++
		}
		if p < len(l.src) && isDigit(l.src[p]) {
			kind = tFloat
			l.pos = p
			for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
				l.pos++
			}
		}
	}
	return token{kind: kind, text: l.src[start:l.pos], pos: start, nl: nl}
}

// quoted reads a "..." string at l.pos, returning its unescaped text (MLIR escapes: \\,
// \", \n, \t and two hex digits).
func (l *lexer) quoted() (string, bool) {
	l.pos++ // opening quote
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch c {
		case '"':
			l.pos++
			return b.String(), true
		case '\\':
			if l.pos+1 >= len(l.src) {
				l.pos++
				return b.String(), false
			}
			e := l.src[l.pos+1]
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '"', '\\':
				b.WriteByte(e)
			default:
				if l.pos+2 < len(l.src) {
					var v byte
					if _, err := fmt.Sscanf(l.src[l.pos+1:l.pos+3], "%02x", &v); err == nil {
						b.WriteByte(v)
						l.pos += 3
						continue
					}
				}
				b.WriteByte(e)
			}
			l.pos += 2
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
	return b.String(), false
}

// lineIndex converts byte offsets of a text to lines and columns in O(log lines) each,
// after one pass over the text (at the first call): a module's ops and errors each
// name their line, and counting newlines from the start for every one of them is
// quadratic in the module. It is safe for concurrent use.
type lineIndex struct {
	once   sync.Once
	starts []int // the offset of every line's first byte
}

// lineCol is lineCol(src, off); src is the text every call of x gives.
func (x *lineIndex) lineCol(src string, off int) (int, int) {
	x.once.Do(func() {
		x.starts = append(make([]int, 0, 1+strings.Count(src, "\n")), 0)
		for i := 0; i < len(src); {
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			x.starts = append(x.starts, i)
		}
	})
	off = min(max(off, 0), len(src))
	// The lines starting at or before off; a newline at off belongs to the line it ends.
	line, _ := slices.BinarySearch(x.starts, off+1)
	return line, off - x.starts[line-1] + 1
}

// lineCol converts a byte offset of src to a 1-based line and column (in bytes).
func lineCol(src string, off int) (int, int) {
	off = min(max(off, 0), len(src))
	line := 1 + strings.Count(src[:off], "\n")
	col := off + 1
	if i := strings.LastIndexByte(src[:off], '\n'); i >= 0 {
		col = off - i
	}
	return line, col
}
