package transfer

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
)

// Names are the names of a repeated tensor entry, generated on demand: Pattern with
// "{i}" replaced by 0..I-1 and "{j}" by 0..J-1, i-major (name k has i = k / J,
// j = k % J). A plain entry (I = J = 1, no placeholder) is Pattern itself.
type Names struct {
	Pattern string
	I, J    int
	// parts are Pattern cut at its placeholders: parts[0], ph[0], parts[1], ph[1], ...
	parts []string
	ph    []byte // 'i' or 'j'
}

// NewNames reads an entry's name with its repeats (repeatI, repeatJ: 0 when not
// given). "{i}" needs repeat and "{j}" repeat_j; a repeat without its placeholder
// appends ".{i}" (".{j}"); any other "{...}" is an error naming field. The names are
// not generated: Count, At and JSONBytes work from the pattern.
func NewNames(name string, repeatI, repeatJ int, field string) (Names, error) {
	n := Names{Pattern: name, I: max(repeatI, 1), J: max(repeatJ, 1)}
	hasI, hasJ := false, false
	rest := name
	for {
		k := strings.IndexByte(rest, '{')
		if k < 0 {
			n.parts = append(n.parts, rest)
			break
		}
		end := strings.IndexByte(rest[k:], '}')
		if end < 0 {
			n.parts = append(n.parts, rest)
			break // a lone "{" is part of the name
		}
		ph := rest[k : k+end+1]
		switch ph {
		case "{i}", "{j}":
		default:
			return n, fielderr.New(field, "has the placeholder %q: names take {i} (0..repeat-1) and {j} (0..repeat_j-1) only", clipName(ph))
		}
		n.parts = append(n.parts, rest[:k])
		n.ph = append(n.ph, ph[1])
		hasI = hasI || ph[1] == 'i'
		hasJ = hasJ || ph[1] == 'j'
		rest = rest[k+end+1:]
	}
	switch {
	case hasI && repeatI == 0:
		return n, fielderr.New(field, "uses {i}: give repeat (how many values {i} takes)")
	case hasJ && repeatJ == 0:
		return n, fielderr.New(field, "uses {j}: give repeat_j (how many values {j} takes)")
	}
	if repeatI > 0 && !hasI {
		n.parts = append(n.parts, "")
		n.parts[len(n.parts)-2] += "."
		n.ph = append(n.ph, 'i')
	}
	if repeatJ > 0 && !hasJ {
		n.parts = append(n.parts, "")
		n.parts[len(n.parts)-2] += "."
		n.ph = append(n.ph, 'j')
	}
	return n, nil
}

func clipName(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Count is how many names there are.
func (n *Names) Count() int { return n.I * n.J }

// At is name k (0 <= k < Count).
func (n *Names) At(k int) string {
	if len(n.ph) == 0 {
		if n.parts == nil {
			return n.Pattern
		}
		return n.parts[0]
	}
	i, j := k/n.J, k%n.J
	var b strings.Builder
	for x, p := range n.parts {
		b.WriteString(p)
		if x < len(n.ph) {
			v := i
			if n.ph[x] == 'j' {
				v = j
			}
			b.WriteString(strconv.Itoa(v))
		}
	}
	return b.String()
}

// JSONBytes is the bytes every name takes written as JSON strings (quotes included,
// no HTML escapes), computed without writing them.
func (n *Names) JSONBytes() int64 {
	lit := int64(2) // the quotes
	ci, cj := int64(0), int64(0)
	for _, p := range n.parts {
		lit += jsonStringBytes(p) - 2
	}
	if n.parts == nil {
		lit = jsonStringBytes(n.Pattern)
	}
	for _, c := range n.ph {
		if c == 'i' {
			ci++
		} else {
			cj++
		}
	}
	I, J := int64(n.I), int64(n.J)
	return I*J*lit + ci*J*digitBytes(I) + cj*I*digitBytes(J)
}

// jsonStringBytes is the length of s encoded as a JSON string (without HTML escapes,
// as the service writes its answers).
func jsonStringBytes(s string) int64 {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return int64(b.Len() - 1) // the newline Encode ends with
}

// digitBytes is the total length of the decimal numbers 0..n-1.
func digitBytes(n int64) int64 {
	if n <= 0 {
		return 0
	}
	total := int64(1) // "0"
	for lo, d := int64(1), int64(1); lo < n; lo, d = lo*10, d+1 {
		hi := min(lo*10, n)
		total += (hi - lo) * d
	}
	return total
}
