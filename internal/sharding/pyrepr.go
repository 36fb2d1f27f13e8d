package sharding

import (
	"math"
	"strconv"
	"strings"
)

// A reader of the Python reprs the frameworks print for meshes and placements:
// Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), DeviceMesh('cuda', [[0, 1], [2, 3]],
// mesh_dim_names=('dp', 'tp')), (Shard(dim=0), Replicate()), array([[0, 1]]). It reads
// calls with positional, keyword (name=value) and dict-like ('x': 2) arguments, lists,
// tuples, quoted strings, integers and dotted names; nothing is evaluated.

// pyKind is the kind of a pyVal.
type pyKind byte

const (
	pyInt pyKind = iota + 1
	pyStr
	pyName // an identifier, possibly dotted (AxisType.Explicit, torch.float32)
	pyList // [...] or (...)
	pyCall // name(args)
)

// pyVal is one parsed value; start and end are its byte offsets in the text.
type pyVal struct {
	kind       pyKind
	start, end int
	num        int64
	str        string  // pyStr: the contents; pyName, pyCall: the name
	items      []pyVal // pyList: the elements; pyCall: the positional arguments
	keys       []pyArg // pyCall: name=value and 'key': value arguments, in order
}

// pyArg is a keyword or dict-like argument of a call.
type pyArg struct {
	key  string
	dict bool // 'key': value rather than key=value
	off  int
	val  pyVal
}

// kw returns the keyword argument named key.
func (v *pyVal) kw(key string) (pyVal, bool) {
	for _, a := range v.keys {
		if !a.dict && a.key == key {
			return a.val, true
		}
	}
	return pyVal{}, false
}

// maxPyDepth bounds nesting so that a hostile string cannot recurse deeply.
const maxPyDepth = 32

// pyValue parses one value at p.pos.
func (p *textParser) pyValue(depth int) (pyVal, error) {
	if depth > maxPyDepth {
		return pyVal{}, p.fail("nested more than %d levels deep", maxPyDepth)
	}
	p.skip()
	start := p.pos
	if p.pos >= len(p.s) {
		return pyVal{}, p.fail("expected a value, found the end")
	}
	switch c := p.s[p.pos]; {
	case c == '[' || c == '(':
		closer := byte(']')
		if c == '(' {
			closer = ')'
		}
		p.pos++
		items, _, err := p.pyArgs(closer, depth, false)
		if err != nil {
			return pyVal{}, err
		}
		return pyVal{kind: pyList, start: start, end: p.pos, items: items}, nil
	case c == '\'' || c == '"':
		end := strings.IndexByte(p.s[p.pos+1:], c)
		if end < 0 {
			return pyVal{}, p.fail("unterminated string")
		}
		p.pos += end + 2
		return pyVal{kind: pyStr, start: start, end: p.pos, str: p.s[start+1 : p.pos-1]}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		p.pos++
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
		if err != nil || n > math.MaxInt32 || n < math.MinInt32 {
			p.pos = start
			return pyVal{}, p.fail("%q is not an integer in range", p.s[start:min(len(p.s), start+12)])
		}
		return pyVal{kind: pyInt, start: start, end: p.pos, num: n}, nil
	case isIdent(c):
		for p.pos < len(p.s) && (isIdent(p.s[p.pos]) || p.s[p.pos] == '.') {
			p.pos++
		}
		name := p.s[start:p.pos]
		if p.pos < len(p.s) && p.s[p.pos] == '(' {
			p.pos++
			items, keys, err := p.pyArgs(')', depth, true)
			if err != nil {
				return pyVal{}, err
			}
			return pyVal{kind: pyCall, start: start, end: p.pos, str: name, items: items, keys: keys}, nil
		}
		return pyVal{kind: pyName, start: start, end: p.pos, str: name}, nil
	default:
		return pyVal{}, p.fail("unexpected '%c'", c)
	}
}

// pyArgs reads comma-separated values up to closer (consumed); a trailing comma is
// allowed. In a call, name=value and 'key': value are keyword arguments.
func (p *textParser) pyArgs(closer byte, depth int, call bool) ([]pyVal, []pyArg, error) {
	var items []pyVal
	var keys []pyArg
	for {
		if p.peek() == closer {
			p.pos++
			return items, keys, nil
		}
		off := p.pos
		v, err := p.pyValue(depth + 1)
		if err != nil {
			return nil, nil, err
		}
		switch c := p.peek(); {
		case call && c == '=' && v.kind == pyName:
			p.pos++
			val, err := p.pyValue(depth + 1)
			if err != nil {
				return nil, nil, err
			}
			keys = append(keys, pyArg{key: v.str, off: off, val: val})
		case call && c == ':' && v.kind == pyStr:
			p.pos++
			val, err := p.pyValue(depth + 1)
			if err != nil {
				return nil, nil, err
			}
			keys = append(keys, pyArg{key: v.str, dict: true, off: off, val: val})
		default:
			items = append(items, v)
		}
		switch p.peek() {
		case ',':
			p.pos++
		case closer:
		default:
			if p.pos >= len(p.s) {
				return nil, nil, p.fail("expected ',' or '%c', found the end", closer)
			}
			return nil, nil, p.fail("expected ',' or '%c'", closer)
		}
	}
}

// pyInts flattens a nested list of integers row-major and returns its shape; every row
// of a level must have the same length.
func (p *textParser) pyInts(v pyVal) (flat []int, shape []int, err error) {
	var walk func(v pyVal, level int) error
	walk = func(v pyVal, level int) error {
		if v.kind == pyInt {
			if level != len(shape) {
				return p.failAt(v.start, "the device list is ragged: a number where a list was expected")
			}
			flat = append(flat, int(v.num))
			return nil
		}
		if v.kind != pyList {
			return p.failAt(v.start, "expected a list of device ids")
		}
		switch {
		case level == len(shape):
			if len(flat) > 0 {
				return p.failAt(v.start, "the device list is ragged: a list where a number was expected")
			}
			shape = append(shape, len(v.items))
		case shape[level] != len(v.items):
			return p.failAt(v.start, "the device list is ragged: a row of %d where the others have %d", len(v.items), shape[level])
		}
		for _, it := range v.items {
			if err := walk(it, level+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(v, 0); err != nil {
		return nil, nil, err
	}
	return flat, shape, nil
}
