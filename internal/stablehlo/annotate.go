package stablehlo

import (
	"sort"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

type edit struct {
	start, end int
	text       string
}

// Annotate returns the module's text with the imported function annotated the way
// sdy_opt prints a propagated module: sdy.sharding = #sdy.sharding<@mesh, [...]> on the
// function's arguments and results and sdy.sharding = #sdy.sharding_per_value<[...]> on
// every op whose results all have a sharding in shardings (tensor id -> sharding);
// sdy.sharding_constraint ops print their updated sharding. Existing sdy.sharding and
// mhlo.sharding attributes are replaced; when the module declares no sdy.mesh of the
// mesh's name, one is added at the top. Everything else is kept byte for byte.
func (imp *Import) Annotate(shardings map[string]sharding.Sharding) string {
	src := imp.Module.Src
	mesh := imp.Mesh
	var edits []edit
	text := func(s sharding.Sharding) string { return "#sdy." + s.Text(mesh.Name) }
	inDict := func(a *Param, entry string) {
		edits = append(edits, dictEdit(a.Attrs, a.Dict, entry)...)
	}
	fn := imp.Func
	for i, a := range fn.Args {
		if i < len(imp.Graph.Inputs) {
			if s, ok := shardings[imp.Graph.Inputs[i]]; ok {
				inDict(a, "sdy.sharding = "+text(s))
			}
		}
	}
	outs := map[int]string{}
	for k := range fn.Results {
		id := "result" + itoa(k)
		if s, ok := shardings[id]; ok {
			outs[k] = "sdy.sharding = " + text(s)
		}
	}
	if len(outs) > 0 {
		if fn.ResultsParen {
			for k, r := range fn.Results {
				if e, ok := outs[k]; ok {
					inDict(r, e)
				}
			}
		} else if e, ok := outs[0]; ok {
			edits = append(edits, edit{fn.ResultsStart, fn.ResultsEnd, "(" + src[fn.ResultsStart:fn.ResultsEnd] + " {" + e + "})"})
		}
	}
	for _, d := range imp.defs {
		op := d.op
		var per []string
		for _, id := range d.ids {
			sh, ok := shardings[id]
			if !ok || id == "" {
				per = nil
				break
			}
			per = append(per, strings.TrimPrefix(sh.Text(mesh.Name), "sharding"))
		}
		if len(per) == 0 {
			continue
		}
		if op.Name == "sdy.sharding_constraint" || op.Name == "sdy.reshard" {
			for _, ps := range op.Positional {
				if r, ok := ps.v.(Raw); ok && strings.HasPrefix(r.Text, "<") {
					edits = append(edits, edit{ps.pos, ps.pos + len(r.Text), per[0]})
				}
			}
			continue
		}
		edits = append(edits, dictEdit(op.Attrs, op.Dict, "sdy.sharding = #sdy.sharding_per_value<["+strings.Join(per, ", ")+"]>")...)
	}
	if !imp.declared[mesh.Name] {
		var b strings.Builder
		b.WriteString("sdy.mesh @" + mesh.Name + " = <[")
		for i, a := range mesh.Axes {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("\"" + a.Name + "\"=" + itoa(a.Size))
		}
		b.WriteString("]")
		if mesh.DeviceIDs != nil {
			b.WriteString(", device_ids=[")
			for i, d := range mesh.DeviceIDs {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(itoa(d))
			}
			b.WriteString("]")
		}
		b.WriteString(">\n")
		at := imp.Module.BodyStart
		lead := ""
		if at > 0 {
			lead = "\n  "
			b2 := b.String()
			edits = append(edits, edit{at, at, lead + strings.TrimSuffix(b2, "\n")})
		} else {
			edits = append(edits, edit{0, 0, b.String()})
		}
	}
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := src
	last := len(src) + 1
	for _, e := range edits {
		if e.end > last {
			continue // overlapping edit (should not happen)
		}
		out = out[:e.start] + e.text + out[e.end:]
		last = e.start
	}
	return out
}

// dictEdit sets entry in an attribute dictionary at span d: it replaces an existing
// sdy.sharding (or mhlo.sharding), appends to a dictionary, or inserts a new one.
func dictEdit(a Attrs, d Span, entry string) []edit {
	for _, k := range []string{"sdy.sharding", "mhlo.sharding"} {
		if sp, ok := a.KeySpan[k]; ok {
			return []edit{{sp.Start, sp.End, entry}}
		}
	}
	if d.End > d.Start {
		// "{...}": insert before the closing brace.
		return []edit{{d.End - 1, d.End - 1, ", " + entry}}
	}
	return []edit{{d.Start, d.Start, " {" + entry + "}"}}
}

func itoa(n int) string { return strconv.Itoa(n) }
