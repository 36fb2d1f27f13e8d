package stablehlo

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// This file reads the shardings attached to values: Shardy attributes, HLO
// mhlo.sharding strings, per-value lists and sharding constraints.

var customRE = regexp.MustCompile(`,\s*custom\s*$`)

var offsetRE = regexp.MustCompile(`^at offset (\d+)(.*)$`)

// sdySharding parses "sharding<@mesh, [...]>" found at pos in Src; nil when it is bound
// to a mesh without axes.
func (b *builder) sdySharding(text string, pos int, shape []int64, what string) *sharding.Sharding {
	if mm := meshRefRE.FindStringSubmatch(text); mm != nil && b.mesh != nil && mm[1] != b.mesh.Name {
		for _, d := range b.imp.Module.Meshes {
			if d.Name == mm[1] && len(d.Axes) == 0 {
				// A sharding on a mesh without axes (Shardy's empty or maximal mesh)
				// has no axes either: it keeps its open and closed dims on the
				// function's mesh, as Shardy replaces it.
				i := strings.Index(text, "@"+mm[1])
				text = text[:i] + "@" + b.mesh.Name + text[i+1+len(mm[1]):]
				pos -= len(b.mesh.Name) - len(mm[1])
				break
			}
		}
	}
	if b.mesh == nil {
		b.errAt(pos, "%s has an sdy sharding but no mesh is known", what)
		return nil
	}
	s, err := sharding.ParseText(text, b.mesh, shape, Field)
	if err != nil {
		b.shardingErr(err, pos, what)
		return nil
	}
	return &s
}

func (b *builder) shardingErr(err error, pos int, what string) {
	es, _ := sharding.AsFieldErrors(err)
	if len(es) == 0 {
		b.errAt(pos, "%s: %v", what, err)
		return
	}
	msg := es[0].Message
	at := pos
	if mm := offsetRE.FindStringSubmatch(msg); mm != nil {
		if off, e := strconv.Atoi(mm[1]); e == nil {
			at = pos + off
			msg = strings.TrimPrefix(mm[2], ": ")
			msg = strings.TrimPrefix(msg, " ")
		}
	}
	b.errAt(at, "sharding of %s: %s", what, msg)
}

func (b *builder) hloSharding(text string, pos int, shape []int64, what string) *sharding.Sharding {
	if b.mesh == nil {
		b.errAt(pos, "%s has an mhlo.sharding but no mesh is known; give the request's \"mesh\"", what)
		return nil
	}
	s, err := sharding.ParseHLO(text, b.mesh, shape, Field)
	if err != nil {
		b.shardingErr(err, pos+1, what)
		return nil
	}
	return &s
}

// splitTop splits s at commas outside brackets, returning each part's offset.
func splitTop(s string) ([]string, []int) {
	var parts []string
	var offs []int
	depth, start := 0, 0
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '-' && i+1 < len(s) && s[i+1] == '>':
			i++
		case strings.IndexByte("([{<", c) >= 0:
			depth++
		case strings.IndexByte(")]}>", c) >= 0:
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, s[start:i])
			offs = append(offs, start)
			start = i + 1
		}
	}
	if strings.TrimSpace(s[start:]) != "" || len(parts) > 0 {
		parts = append(parts, s[start:])
		offs = append(offs, start)
	}
	return parts, offs
}

// perValue reads a #sdy.sharding_per_value<[<@mesh, [...]>, ...]> (attribute attr of op,
// whose text starts at pos in Src) onto the result tensors.
func (b *builder) perValue(op *Op, attr, text string, pos int, results []string) {
	g := b.imp.Graph
	const pre = "#sdy.sharding_per_value<["
	if !strings.HasPrefix(text, pre) || !strings.HasSuffix(text, "]>") {
		b.errAt(pos, "%s must be #sdy.sharding_per_value<[<@mesh, [...]>, ...]>", attr)
		return
	}
	inner := text[len(pre) : len(text)-2]
	parts, offs := splitTop(inner)
	if len(parts) != len(results) {
		b.errAt(pos, "%s has %d shardings but %s has %d results", attr, len(parts), op.Name, len(results))
		return
	}
	for k, part := range parts {
		if results[k] == "" {
			continue
		}
		lead := len(part) - len(strings.TrimLeft(part, " \t\r\n"))
		t := g.Tensors[results[k]]
		t.Sharding = b.sdySharding("sharding"+strings.TrimSpace(part), pos+len(pre)+offs[k]+lead-len("sharding"), t.Shape, "%"+results[k])
	}
}

// resultShardings reads an op's sdy.sharding (sharding_per_value) or mhlo.sharding for
// its results.
func (b *builder) resultShardings(op *Op, results []string) {
	g := b.imp.Graph
	if r, ok := op.Attrs.Vals["sdy.sharding"].(Raw); ok {
		b.perValue(op, "sdy.sharding", r.Text, op.Attrs.Pos["sdy.sharding"], results)
		return
	}
	if op.Name == "sdy.manual_computation" {
		// Opaque, but its out_shardings are the global layouts of its results:
		// [<@mesh, ...>, ...] in the pretty form, #sdy.sharding_per_value<...> in the
		// generic one.
		switch v := op.Attrs.Vals["out_shardings"].(type) {
		case Raw:
			b.perValue(op, "out_shardings", v.Text, op.Attrs.Pos["out_shardings"], results)
		case []any:
			// The list's text, wrapped so its '[' lands at its own offset.
			const wrap = "#sdy.sharding_per_value<"
			pos := op.Attrs.Pos["out_shardings"]
			b.perValue(op, "out_shardings", wrap+b.imp.Module.Src[pos:op.Attrs.KeySpan["out_shardings"].End]+">", pos-len(wrap), results)
		}
		return
	}
	if s, ok := op.Attrs.Vals["mhlo.sharding"].(string); ok {
		pos := op.Attrs.Pos["mhlo.sharding"]
		if b.mesh == nil {
			b.errAt(pos, "%s has an mhlo.sharding but no mesh is known; give the request's \"mesh\"", op.Name)
			return
		}
		shapes := make([][]int64, len(results))
		for k, id := range results {
			if id == "" {
				return // a non-tensor result: the sharding is not read
			}
			shapes[k] = g.Tensors[id].Shape
		}
		shs, err := sharding.ParseHLOTuple(s, b.mesh, shapes, Field)
		if err != nil {
			b.shardingErr(err, pos+1, "%"+strings.Join(results, ", %"))
			return
		}
		for k, id := range results {
			g.Tensors[id].Sharding = &shs[k]
		}
	}
}

// constraintSharding is the sharding of an sdy.sharding_constraint or sdy.reshard: the
// pretty form's <@mesh, [...]> ("sharding" prefixed) or the generic form's sharding
// property, with the position of its "sharding<" text (ok false when there is none).
func constraintSharding(op *Op) (text string, pos int, span Span, ok bool) {
	for _, ps := range op.Positional {
		if r, isRaw := ps.v.(Raw); isRaw && strings.HasPrefix(r.Text, "<") {
			return "sharding" + r.Text, ps.pos - len("sharding"), Span{ps.pos, ps.pos + len(r.Text)}, true
		}
	}
	if r, isRaw := op.Attrs.Vals["sharding"].(Raw); isRaw && strings.HasPrefix(r.Text, "#sdy.sharding<") {
		return strings.TrimPrefix(r.Text, "#sdy."), op.Attrs.Pos["sharding"] + len("#sdy."), op.Attrs.KeySpan["sharding"], true
	}
	if r, isRaw := op.Attrs.Vals["sharding"].(Raw); isRaw && strings.HasPrefix(r.Text, "<@") {
		// sdy.data_flow_edge %x sharding=<@mesh, [...]>
		pos := op.Attrs.Pos["sharding"]
		return "sharding" + r.Text, pos - len("sharding"), Span{pos, pos + len(r.Text)}, true
	}
	return "", 0, Span{}, false
}
