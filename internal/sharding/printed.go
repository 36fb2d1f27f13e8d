package sharding

import (
	"strings"
)

// Shardings as the frameworks print them, beside the forms parse.go reads.

// The forms ParseString tells apart, named as its errors name them.
const (
	formShardy     = "Shardy text"
	formSdyAttr    = "a Shardy #sdy.sharding attribute"
	formHLO        = "an XLA HloSharding"
	formHLODump    = "an HLO dump's sharding={...}"
	formPSpec      = "a JAX PartitionSpec"
	formJAXRepr    = "a jax.Array.sharding repr"
	formPlacements = "DTensor placements"
	formDTensor    = "a DTensor repr's placements"
)

// placementNames start a DTensor placement as torch prints it.
var placementNames = []string{"Shard(", "Replicate(", "Partial(", "_StridedShard(", "_Partial(", "_NormPartial("}

// ShardingForm names the form ParseString reads text as.
func ShardingForm(text string) string {
	t := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(t, "{"); ok {
		if rest = strings.TrimSpace(rest); rest != "" && (rest[0] == '{' || (rest[0] >= 'a' && rest[0] <= 'z')) {
			return formHLO
		}
	}
	switch {
	case strings.HasPrefix(t, "sharding={") || strings.HasPrefix(t, "sharding= {"):
		return formHLODump
	case isPartitionSpecText(t):
		return formPSpec
	case isJAXRepr(t):
		return formJAXRepr
	case strings.HasPrefix(t, "DTensor("):
		return formDTensor
	case placementsTuple(t):
		return formPlacements
	case strings.HasPrefix(t, "#sdy.sharding<"), strings.HasPrefix(t, "#sdy.sharding_per_value<"), strings.HasPrefix(t, "<@"):
		return formSdyAttr
	}
	return formShardy
}

// placementsTuple reports whether t is a placement or a tuple or list of them:
// "(Shard(dim=0), Replicate())", "[Shard(0)]", "Replicate()".
func placementsTuple(t string) bool {
	t = strings.TrimSpace(t)
	if rest, ok := strings.CutPrefix(t, "("); ok {
		t = strings.TrimSpace(rest)
	} else if rest, ok := strings.CutPrefix(t, "["); ok {
		t = strings.TrimSpace(rest)
	}
	for _, n := range placementNames {
		if strings.HasPrefix(t, n) {
			return true
		}
	}
	return false
}

// parseHLODump reads "sharding={...}" with what may follow it in a dump's instruction:
// ", metadata={...}", ", frontend_attributes={...}" and other key=value attributes.
func parseHLODump(text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	p := &textParser{s: text, field: field, m: m}
	p.skip()
	p.pos += len("sharding")
	if err := p.expect('='); err != nil {
		return Sharding{}, err
	}
	p.skip()
	start := p.pos
	if err := p.skipBalanced(); err != nil {
		return Sharding{}, err
	}
	end := p.pos
	for p.peek() == ',' {
		p.pos++
		p.skip()
		if w := p.word(); w == "" {
			return Sharding{}, p.fail("expected an attribute such as metadata={...} after ','")
		}
		if err := p.expect('='); err != nil {
			return Sharding{}, err
		}
		if err := p.skipValue(); err != nil {
			return Sharding{}, err
		}
	}
	if p.peek() != 0 {
		return Sharding{}, p.fail("unexpected %q after the sharding", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	// Parse the braces in place, so that offsets stay those of the text.
	q := &textParser{s: text[:end], pos: start, field: field, m: m}
	return q.hloAt(m, shape)
}

// skipValue skips an attribute value of an HLO instruction: {...}, "...", or a word.
func (p *textParser) skipValue() error {
	switch p.peek() {
	case '{':
		return p.skipBalanced()
	case '"':
		end := strings.IndexByte(p.s[p.pos+1:], '"')
		if end < 0 {
			return p.fail("unterminated string")
		}
		p.pos += end + 2
		return nil
	}
	for p.pos < len(p.s) && p.s[p.pos] != ',' {
		p.pos++
	}
	return nil
}

// parsePlacementsText reads DTensor placements as torch prints them: a tuple or list
// "(Shard(dim=0), Replicate())", one placement on a one-axis mesh, or a DTensor repr
// whose placements=(...) is read (the rest of it ignored).
func parsePlacementsText(text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	p := &textParser{s: text, field: field, m: m}
	p.skip()
	repr := strings.HasPrefix(p.s[p.pos:], "DTensor(")
	if repr {
		at := strings.Index(p.s, "placements=")
		if at < 0 {
			return Sharding{}, p.fail("a DTensor repr without placements=(...)")
		}
		p.pos = at + len("placements=")
	}
	v, err := p.pyValue(0)
	if err != nil {
		return Sharding{}, err
	}
	if c := p.peek(); c != 0 && !(repr && (c == ',' || c == ')')) {
		return Sharding{}, p.fail("unexpected %q after the placements", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	items := []pyVal{v}
	if v.kind == pyList {
		items = v.items
	}
	texts := make([]string, len(items))
	fields := make([]string, len(items))
	for i, it := range items {
		if it.kind != pyCall && it.kind != pyName {
			return Sharding{}, p.failAt(it.start, "expected a placement such as Shard(dim=0), Replicate() or Partial()")
		}
		texts[i] = text[it.start:it.end]
		fields[i] = field
	}
	return placementsSharding(texts, fields, m, shape, field)
}
