package hlo

import (
	"math"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
)

// ProfileField is the wire field a measured profile's errors name.
const ProfileField = "profile"

// MaxProfileEntries bounds the costs a profile lists.
const MaxProfileEntries = 1 << 20

// ParseProfile reads the text form of XLA's profile-guided latency estimator's profile
// (a ProfiledInstructionsProto): entries `costs { name: "all-gather-start.1" cost_us:
// 7040.5 }`, in any order and spacing, with `#` comments. Other entries (latencies,
// memory figures, ...) and other fields are skipped. It returns the cost in
// microseconds per run of each named instruction (a name listed twice keeps its last
// cost). Errors are *fielderr.FieldError on ProfileField naming the line and column.
// It never panics and runs in time linear in the text.
func ParseProfile(text string) (map[string]float64, error) {
	p := &protoText{src: text}
	out := map[string]float64{}
	for {
		p.space()
		if p.pos >= len(p.src) {
			return out, nil
		}
		fieldPos := p.pos
		field := p.word()
		if field == "" {
			return nil, p.errAt(p.pos, "expected an entry such as costs { name: \"...\" cost_us: 1.5 }, found %s", p.found())
		}
		p.space()
		p.accept(':')
		p.space()
		if field != "costs" {
			if err := p.skipValue(field); err != nil {
				return nil, err
			}
			continue
		}
		if !p.accept('{') {
			return nil, p.errAt(p.pos, "expected '{' after costs, found %s", p.found())
		}
		name, cost := "", math.NaN()
		for {
			p.space()
			if p.accept('}') {
				break
			}
			if p.pos >= len(p.src) {
				return nil, p.errAt(fieldPos, "costs { is not closed by '}'")
			}
			key := p.word()
			if key == "" {
				return nil, p.errAt(p.pos, "expected a field of costs (name, cost_us), found %s", p.found())
			}
			p.space()
			p.accept(':')
			p.space()
			switch key {
			case "name":
				s, err := p.str()
				if err != nil {
					return nil, err
				}
				name = s
			case "cost_us":
				numPos := p.pos
				v, err := strconv.ParseFloat(p.word(), 64)
				if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
					return nil, p.errAt(numPos, "cost_us must be a non-negative number of microseconds")
				}
				cost = v
			default:
				if err := p.skipValue(key); err != nil {
					return nil, err
				}
			}
		}
		if name == "" || math.IsNaN(cost) {
			return nil, p.errAt(fieldPos, "a costs entry needs both name: \"...\" and cost_us: N")
		}
		if _, seen := out[name]; !seen && len(out) >= MaxProfileEntries {
			return nil, p.errAt(fieldPos, "the profile lists more than %d costs", MaxProfileEntries)
		}
		out[name] = cost
	}
}

// protoText is a cursor over protobuf text format.
type protoText struct {
	src string
	pos int
}

func (p *protoText) errAt(pos int, format string, args ...any) error {
	line, col := LineCol(p.src, pos)
	return fielderr.New(ProfileField, "line %d, column %d: "+format, append([]any{line, col}, args...)...)
}

func (p *protoText) found() string {
	if p.pos >= len(p.src) {
		return "the end of the text"
	}
	end := min(len(p.src), p.pos+20)
	if nl := strings.IndexByte(p.src[p.pos:end], '\n'); nl >= 0 {
		end = p.pos + nl
	}
	return strconv.Quote(p.src[p.pos:end])
}

func (p *protoText) space() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',' || c == ';':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func (p *protoText) accept(c byte) bool {
	if p.pos < len(p.src) && p.src[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

// word reads an identifier or a number.
func (p *protoText) word() string {
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '+' {
			p.pos++
			continue
		}
		break
	}
	return p.src[start:p.pos]
}

// str reads a quoted string ('...' or "...", with C escapes).
func (p *protoText) str() (string, error) {
	start := p.pos
	if p.pos >= len(p.src) || p.src[p.pos] != '"' && p.src[p.pos] != '\'' {
		return "", p.errAt(p.pos, "expected a quoted name, found %s", p.found())
	}
	q := p.src[p.pos]
	p.pos++
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '\\':
			p.pos += 2
			continue
		case '\n':
			return "", p.errAt(start, "unterminated string")
		case q:
			p.pos++
			raw := p.src[start:p.pos]
			if q == '\'' {
				raw = `"` + strings.ReplaceAll(raw[1:len(raw)-1], `"`, `\"`) + `"`
			}
			s, err := strconv.Unquote(raw)
			if err != nil {
				return "", p.errAt(start, "the string %s does not read: %v", clip(raw), err)
			}
			return s, nil
		}
		p.pos++
	}
	return "", p.errAt(start, "unterminated string")
}

// skipValue skips a scalar, a string or a { ... } message (nested, without recursion).
func (p *protoText) skipValue(field string) error {
	switch {
	case p.pos < len(p.src) && (p.src[p.pos] == '"' || p.src[p.pos] == '\''):
		_, err := p.str()
		return err
	case p.accept('{'), p.accept('<'):
		depth := 1
		for depth > 0 {
			p.space()
			if p.pos >= len(p.src) {
				return p.errAt(p.pos, "%s { is not closed by '}'", field)
			}
			switch c := p.src[p.pos]; {
			case c == '{' || c == '<':
				depth++
				p.pos++
			case c == '}' || c == '>':
				depth--
				p.pos++
			case c == '"' || c == '\'':
				if _, err := p.str(); err != nil {
					return err
				}
			case c == ':' || c == '[' || c == ']':
				p.pos++
			default:
				if p.word() == "" {
					return p.errAt(p.pos, "unexpected %s in %s", p.found(), field)
				}
			}
		}
		return nil
	}
	if p.word() == "" {
		return p.errAt(p.pos, "expected a value for %s, found %s", field, p.found())
	}
	return nil
}
