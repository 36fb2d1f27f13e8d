package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// jsonAppender writes JSON by hand, byte for byte as encodeJSON (or, with html,
// json.Marshal) writes it, for what grows with the mesh or the graph: the reshard answer
// (reshard.go), the graph answer (graph.go), the parts of a plan both share
// (planjson.go) and the graph's plan id (graphdomain.go).

// errNotFast is the appender's error for a value it does not write the way
// encoding/json does (a NaN or infinite float); the answer's encoder then encodes with
// encoding/json, whose error it returns.
var errNotFast = errors.New("api: value not handled by the fast graph encoder")

// jsonAppender appends JSON to b; the first failure is kept in err (and later writes
// are harmless). With html, strings escape <, > and & as json.Marshal does; without, as
// encodeJSON does.
type jsonAppender struct {
	b    []byte
	err  error
	html bool
	// tensors, when set, replaces the graph answer's Shardings and Explain maps.
	tensors *tensorAnswers
	// written are the last shardings written (sharding), of nWritten in all.
	written  [maxWrittenShardings]writtenSharding
	nWritten int
}

// ref appends v as encoding/json encodes it (the members not written by hand).
func (e *jsonAppender) ref(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(e.html)
	if err := enc.Encode(v); err != nil {
		e.fail(err)
		return
	}
	e.b = append(e.b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func (e *jsonAppender) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// key appends a member name and its colon, preceded by a comma unless first.
func (e *jsonAppender) key(name string, first bool) {
	if !first {
		e.b = append(e.b, ',')
	}
	e.str(name)
	e.b = append(e.b, ':')
}

// optInt appends member (`,"name":`) and *n unless n is nil (an omitempty pointer).
func (e *jsonAppender) optInt(member string, n *int) {
	if n != nil {
		e.b = append(e.b, member...)
		e.int(int64(*n))
	}
}

// strAt and the other ...At methods append a member name (`,"name":`) and its value.
func (e *jsonAppender) strAt(member, s string) {
	e.b = append(e.b, member...)
	e.str(s)
}

// optStr appends member and s unless s is empty (an omitempty string).
func (e *jsonAppender) optStr(member, s string) {
	if s != "" {
		e.strAt(member, s)
	}
}

func (e *jsonAppender) intAt(member string, n int64) {
	e.b = append(e.b, member...)
	e.int(n)
}

func (e *jsonAppender) floatAt(member string, f float64) {
	e.b = append(e.b, member...)
	e.float(f)
}

func (e *jsonAppender) boolAt(member string, v bool) {
	e.b = append(e.b, member...)
	e.bool(v)
}

func (e *jsonAppender) strsAt(member string, ss []string) {
	e.b = append(e.b, member...)
	e.strs(ss)
}

func (e *jsonAppender) str(s string) { e.b = appendJSONString(e.b, s, e.html) }

func (e *jsonAppender) int(n int64) { e.b = appendInt(e.b, n) }

func (e *jsonAppender) bool(v bool) { e.b = strconv.AppendBool(e.b, v) }

// float appends f as encoding/json does (ES6 number formatting); NaN and infinities
// are errNotFast.
func (e *jsonAppender) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail(errNotFast)
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if n := len(e.b); format == 'e' && n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
		e.b[n-2] = e.b[n-1] // e-07 -> e-7
		e.b = e.b[:n-1]
	}
}

// list appends xs as an array (nil: null), each element written by elem.
func list[T any](e *jsonAppender, xs []T, elem func(*T)) {
	if xs == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		elem(&xs[i])
	}
	e.b = append(e.b, ']')
}

func (e *jsonAppender) strs(ss []string) { list(e, ss, func(s *string) { e.str(*s) }) }

// ints appends ns as an array (nil: null). It loops itself rather than through list's
// call of a closure per element: integer lists (shapes, pairs, transfer ranges) are
// most of a large answer.
func ints[T int | int64](e *jsonAppender, ns []T) {
	if ns == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i, n := range ns {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = appendInt(e.b, int64(n))
	}
	e.b = append(e.b, ']')
}

// appendInt appends n in decimal, as strconv.AppendInt(dst, n, 10) does. Numbers below
// 10,000 (device ids, dims, range bounds of most answers) are written from twoDigits
// without strconv's general loop.
func appendInt(dst []byte, n int64) []byte {
	switch {
	case n < 0 || n >= 10000:
		return strconv.AppendInt(dst, n, 10)
	case n < 10:
		return append(dst, byte('0'+n))
	case n < 100:
		return append(dst, twoDigits[2*n], twoDigits[2*n+1])
	case n < 1000:
		hi, lo := n/100, n%100
		return append(dst, byte('0'+hi), twoDigits[2*lo], twoDigits[2*lo+1])
	}
	hi, lo := n/100, n%100
	return append(dst, twoDigits[2*hi], twoDigits[2*hi+1], twoDigits[2*lo], twoDigits[2*lo+1])
}

// appendJSONString appends s as a JSON string the way encoding/json does: `"` and `\`
// escaped, \b \f \n \r \t by name, other control bytes as \u00XX, invalid UTF-8 bytes
// as \ufffd, U+2028 and U+2029 as \u2028 and \u2029; with html (json.Marshal's
// default) <, > and & as \u003c, \u003e and \u0026; everything else as is.
func appendJSONString(dst []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!html || b != '<' && b != '>' && b != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// twoDigits holds "00" to "99", two bytes each.
const twoDigits = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// maxWrittenShardings is how many written shardings an appender remembers.
const maxWrittenShardings = 8
