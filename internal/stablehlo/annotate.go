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
	a := &annotator{imp: imp, shardings: shardings}
	a.args()
	a.results()
	for _, d := range imp.defs {
		a.op(d)
	}
	if !imp.declared[imp.Mesh.Name] {
		a.meshDecl()
	}
	return applyEdits(imp.Module.Src, a.edits)
}

// annotator collects the edits Annotate makes to the module's text.
type annotator struct {
	imp       *Import
	shardings map[string]sharding.Sharding // tensor id -> sharding
	edits     []edit
}

// text prints s as an sdy attribute value on the import's mesh.
func (a *annotator) text(s sharding.Sharding) string {
	return "#sdy." + s.Text(a.imp.Mesh.Name)
}

// inDict sets entry in p's attribute dictionary; the generic form's arg_attrs are left
// as they are.
func (a *annotator) inDict(p *Param, entry string) {
	if p.Dict.Start >= 0 {
		a.edits = append(a.edits, dictEdit(p.Attrs, p.Dict, entry)...)
	}
}

// hasSharding reports whether a value with attributes at and sharding s gets one printed.
// A value propagation left open and empty has no sharding: sdy_opt prints none, unless
// one was written (then it prints what became of it).
func hasSharding(at Attrs, s sharding.Sharding) bool {
	_, sdy := at.Vals["sdy.sharding"]
	_, hlo := at.Vals["mhlo.sharding"]
	return sdy || hlo || !unset(s)
}

// args annotates the function's arguments.
func (a *annotator) args() {
	fn := a.imp.Func
	args := map[string]*Param{}
	for i, p := range fn.Args {
		name := p.Name
		if name == "" {
			name = "arg" + itoa(i)
		}
		args[name] = p
	}
	for _, id := range a.imp.Graph.Inputs {
		p := args[id]
		if s, ok := a.shardings[id]; ok && p != nil && hasSharding(p.Attrs, s) {
			a.inDict(p, "sdy.sharding = "+a.text(s))
		}
	}
}

// results annotates the function's results; a single unparenthesized result type gets
// parentheses to hold its dictionary.
func (a *annotator) results() {
	fn := a.imp.Func
	outs := map[int]string{}
	for k, r := range fn.Results {
		id := "result" + itoa(k)
		if s, ok := a.shardings[id]; ok && hasSharding(r.Attrs, s) {
			outs[k] = "sdy.sharding = " + a.text(s)
		}
	}
	if len(outs) == 0 {
		return
	}
	if fn.ResultsParen {
		for k, r := range fn.Results {
			if e, ok := outs[k]; ok {
				a.inDict(r, e)
			}
		}
	} else if e, ok := outs[0]; ok && fn.ResultsStart >= 0 {
		src := a.imp.Module.Src
		a.edits = append(a.edits, edit{fn.ResultsStart, fn.ResultsEnd, "(" + src[fn.ResultsStart:fn.ResultsEnd] + " {" + e + "})"})
	}
}

// op annotates one op of the function with the shardings of all its results, or updates
// the sharding a constraint-like op carries.
func (a *annotator) op(d opDef) {
	op := d.op
	if op.Name == "sdy.manual_computation" {
		return // its out_shardings say it already
	}
	mesh := a.imp.Mesh
	var per []string
	set := false
	for _, id := range d.ids {
		sh, ok := a.shardings[id]
		if !ok || id == "" {
			per = nil
			break
		}
		set = set || hasSharding(op.Attrs, sh)
		per = append(per, strings.TrimPrefix(sh.Text(mesh.Name), "sharding"))
	}
	if !set || len(per) == 0 {
		return
	}
	if op.Name == "sdy.sharding_constraint" || op.Name == "sdy.reshard" || op.Name == "sdy.data_flow_edge" {
		if _, _, span, ok := constraintSharding(op); ok {
			src := a.imp.Module.Src
			if op.Generic && strings.HasPrefix(src[span.Start:span.End], "sharding") {
				a.edits = append(a.edits, edit{span.Start, span.End, "sharding = " + a.text(a.shardings[d.ids[0]])})
			} else {
				a.edits = append(a.edits, edit{span.Start, span.End, per[0]})
			}
			return
		}
	}
	entry := "sdy.sharding = #sdy.sharding_per_value<[" + strings.Join(per, ", ") + "]>"
	if op.DictKeyword && op.Dict.Start == op.Dict.End {
		a.edits = append(a.edits, edit{op.Dict.Start, op.Dict.Start, " attributes {" + entry + "}"})
		return
	}
	a.edits = append(a.edits, dictEdit(op.Attrs, op.Dict, entry)...)
}

// meshDecl declares the import's mesh at the top of the module.
func (a *annotator) meshDecl() {
	mesh := a.imp.Mesh
	var b strings.Builder
	b.WriteString("sdy.mesh @" + mesh.Name + " = <[")
	for i, ax := range mesh.Axes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("\"" + ax.Name + "\"=" + itoa(ax.Size))
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
	if at := a.imp.Module.BodyStart; at > 0 {
		a.edits = append(a.edits, edit{at, at, "\n  " + strings.TrimSuffix(b.String(), "\n")})
	} else {
		a.edits = append(a.edits, edit{0, 0, b.String()})
	}
}

// applyEdits applies edits to src in order of their start; an edit overlapping an
// earlier one is dropped.
func applyEdits(src string, edits []edit) string {
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
