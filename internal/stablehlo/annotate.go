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
		if a.Dict.Start >= 0 { // the generic form's arg_attrs are left as they are
			edits = append(edits, dictEdit(a.Attrs, a.Dict, entry)...)
		}
	}
	// A value propagation left open and empty has no sharding: sdy_opt prints none,
	// unless one was written (then it prints what became of it).
	has := func(a Attrs, s sharding.Sharding) bool {
		_, sdy := a.Vals["sdy.sharding"]
		_, hlo := a.Vals["mhlo.sharding"]
		return sdy || hlo || !unset(s)
	}
	fn := imp.Func
	args := map[string]*Param{}
	for i, a := range fn.Args {
		name := a.Name
		if name == "" {
			name = "arg" + itoa(i)
		}
		args[name] = a
	}
	for _, id := range imp.Graph.Inputs {
		a := args[id]
		if s, ok := shardings[id]; ok && a != nil && has(a.Attrs, s) {
			inDict(a, "sdy.sharding = "+text(s))
		}
	}
	outs := map[int]string{}
	for k, r := range fn.Results {
		id := "result" + itoa(k)
		if s, ok := shardings[id]; ok && has(r.Attrs, s) {
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
		} else if e, ok := outs[0]; ok && fn.ResultsStart >= 0 {
			edits = append(edits, edit{fn.ResultsStart, fn.ResultsEnd, "(" + src[fn.ResultsStart:fn.ResultsEnd] + " {" + e + "})"})
		}
	}
	for _, d := range imp.defs {
		op := d.op
		if op.Name == "sdy.manual_computation" {
			continue // its out_shardings say it already
		}
		var per []string
		set := false
		for _, id := range d.ids {
			sh, ok := shardings[id]
			if !ok || id == "" {
				per = nil
				break
			}
			set = set || has(op.Attrs, sh)
			per = append(per, strings.TrimPrefix(sh.Text(mesh.Name), "sharding"))
		}
		if !set {
			continue
		}
		if len(per) == 0 {
			continue
		}
		if op.Name == "sdy.sharding_constraint" || op.Name == "sdy.reshard" || op.Name == "sdy.data_flow_edge" {
			if _, _, span, ok := constraintSharding(op); ok {
				if op.Generic && strings.HasPrefix(src[span.Start:span.End], "sharding") {
					edits = append(edits, edit{span.Start, span.End, "sharding = " + text(shardings[d.ids[0]])})
				} else {
					edits = append(edits, edit{span.Start, span.End, per[0]})
				}
				continue
			}
		}
		entry := "sdy.sharding = #sdy.sharding_per_value<[" + strings.Join(per, ", ") + "]>"
		if op.DictKeyword && op.Dict.Start == op.Dict.End {
			edits = append(edits, edit{op.Dict.Start, op.Dict.Start, " attributes {" + entry + "}"})
			continue
		}
		edits = append(edits, dictEdit(op.Attrs, op.Dict, entry)...)
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
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	var out strings.Builder
	out.Grow(len(src) + len(edits)*64)
	at := 0
	for _, e := range edits {
		if e.start < at {
			continue // overlapping edit (should not happen)
		}
		out.WriteString(src[at:e.start])
		out.WriteString(e.text)
		at = e.end
	}
	out.WriteString(src[at:])
	return out.String()
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

// unset reports whether s is every dim open with no axes: no sharding at all.
func unset(s sharding.Sharding) bool {
	if len(s.Replicated) > 0 || len(s.Unreduced) > 0 {
		return false
	}
	for _, d := range s.Dims {
		if !d.Open || len(d.Axes) > 0 {
			return false
		}
	}
	return true
}

func itoa(n int) string { return strconv.Itoa(n) }
