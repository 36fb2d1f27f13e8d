package hlo

import (
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/sharding"
)

// DefaultAxis names the one axis of the mesh a module is decoded on when the request
// gives none: num_partitions devices in id order.
const DefaultAxis = "devices"

// Options say how Analyze decodes and prices a module.
type Options struct {
	// Mesh is the request's mesh (nil: one axis DefaultAxis of num_partitions devices).
	Mesh *sharding.Mesh
	// MeshField names Mesh in errors ("mesh").
	MeshField string
	Model     cost.Model
	// MaxDecodeWork bounds the device entries decoded (0: DefaultMaxDecodeWork).
	MaxDecodeWork int
}

// Collective is one collective instruction of the module, decoded and priced.
type Collective struct {
	Computation string
	Name        string // instruction name without '%'
	Opcode      string // as printed: all-gather, all-gather-start, ...
	Kind        cost.Kind
	Line        int
	Column      int
	Metadata    Metadata
	ChannelID   int // 0 when absent
	// Dims is the gather, scatter or split dimension(s) (all-gather, reduce-scatter,
	// array all-to-all).
	Dims []int64
	// GroupSize and GroupCount: the device groups (collective-permute: the pairs).
	GroupSize  int
	GroupCount int
	Pairs      [][2]int
	// MeshAxes are the axes the groups run over (collective-permute: the axes on which
	// some pair moves), major to minor; AxesNote says why they are missing when the
	// groups match no axes of the mesh.
	MeshAxes []sharding.AxisRef
	AxesNote string
	// InBytes and OutBytes are one device's buffers; BytesPerDevice what the busiest
	// device receives (ring volumes for reductions, as the reshard planner counts).
	InBytes, OutBytes int64
	BytesPerDevice    int64
	Cost              cost.Estimate
	// FullRematerialization: this gather is part of a chain that makes the whole
	// tensor on every device, which a dynamic-slice then cuts (see Remat).
	FullRematerialization bool
}

// Metadata is what an instruction's metadata={...} says of its origin.
type Metadata struct {
	OpName     string
	SourceFile string
	SourceLine int
}

// Remat is XLA's full-rematerialization pattern: gathers that make a sharded tensor
// whole on every device, then a dynamic-slice (on its own or in a fusion) that keeps a
// piece of it.
type Remat struct {
	Computation string
	// Gathers are the chain's all-gathers, first to last; Slice is the instruction
	// that slices the whole tensor (a dynamic-slice or a fusion containing one).
	Gathers []string
	Slice   string
	Line    int
	Column  int
	// Shape is the whole tensor's shape; Source the sharded value the chain starts
	// from and SourceSharding its sharding= text when the module prints one.
	Shape          Shape
	Source         string
	SourceSharding string
	Metadata       Metadata
	// TimeUS and BytesPerDevice sum the chain's gathers.
	TimeUS         float64
	BytesPerDevice int64
	// From and To are the shardings on both sides of the chain on the mesh: the
	// source's sharding=, and the tiles the dynamic-slice cuts for each partition (nil
	// when they do not read; Note says why).
	From, To *sharding.Sharding
	Note     string
}

// Analysis is a module's collectives and remats, priced.
type Analysis struct {
	Module      *Module
	Mesh        *sharding.Mesh
	Collectives []Collective
	Remats      []Remat
	// TimeUS and BytesPerDevice sum every collective (no overlap assumed).
	TimeUS         float64
	BytesPerDevice int64

	// groups memoizes the decoding of each replica_groups text (a module repeats a few).
	groups map[string]decodedGroups
	// work counts the device entries decoded, against maxWork.
	work, maxWork int
}

// decodedGroups is one replica_groups text decoded on the mesh.
type decodedGroups struct {
	size, count int
	axes        []sharding.AxisRef
	note        string
}

// DefaultMaxDecodeWork bounds the device entries Analyze decodes over a whole module
// (distinct replica_groups texts, each listing every device once, and the partitions of
// the remat slices it evaluates): 2^24, 256 distinct groupings on 65,536 devices.
const DefaultMaxDecodeWork = 1 << 24

// collectiveOps maps the opcodes of collectives to their kinds ("-start" forms are
// the collective; "-done" ones are skipped).
var collectiveOps = map[string]cost.Kind{
	"all-gather": cost.AllGather, "all-gather-start": cost.AllGather,
	"all-reduce": cost.AllReduce, "all-reduce-start": cost.AllReduce,
	"reduce-scatter":     cost.ReduceScatter,
	"all-to-all":         cost.AllToAll,
	"ragged-all-to-all":  cost.AllToAllV,
	"collective-permute": cost.CollectivePermute, "collective-permute-start": cost.CollectivePermute,
}

// Analyze decodes every collective of m onto opts.Mesh, prices it with opts.Model and
// finds the full-rematerialization chains. Errors are *fielderr.FieldError: on Field
// (naming the line and column) for attributes that do not parse, on opts.MeshField when
// the mesh does not have the module's num_partitions devices.
func Analyze(m *Module, opts Options) (*Analysis, error) {
	mesh := opts.Mesh
	devices := m.NumPartitions * m.NumReplicas
	if mesh == nil {
		var err error
		mesh, err = sharding.NewMesh(sharding.DefaultMeshName, []sharding.Axis{{Name: DefaultAxis, Size: devices}}, nil)
		if err != nil {
			return nil, err
		}
	} else if mesh.NumDevices() != devices {
		field := opts.MeshField
		if field == "" {
			field = "mesh"
		}
		return nil, fielderr.New(field, "the mesh %s has %d devices; the module runs on %d (num_partitions=%d, replica_count=%d): give a mesh of %d devices, or none", mesh, mesh.NumDevices(), devices, m.NumPartitions, m.NumReplicas, devices)
	}
	a := &Analysis{Module: m, Mesh: mesh, maxWork: opts.MaxDecodeWork}
	if a.maxWork <= 0 {
		a.maxWork = DefaultMaxDecodeWork
	}
	var router *cost.Router
	if f, ok := opts.Model.(*cost.Fabric); ok {
		router = f.NewRouter(mesh)
	}
	for _, c := range m.Computations {
		for _, in := range c.Instrs {
			kind, ok := collectiveOps[in.Opcode]
			if !ok {
				continue
			}
			col, err := a.decode(c, in, kind, opts.Model, router)
			if err != nil {
				return nil, err
			}
			a.Collectives = append(a.Collectives, col)
		}
	}
	if err := a.findRemats(); err != nil {
		return nil, err
	}
	for i := range a.Collectives {
		a.TimeUS += a.Collectives[i].Cost.TimeUS
		a.BytesPerDevice += a.Collectives[i].BytesPerDevice
	}
	return a, nil
}

func (a *Analysis) errAt(in *Instr, attr string, format string, args ...any) error {
	pos := in.Pos
	if p, ok := in.AttrPos[attr]; ok {
		pos = p
	}
	line, col := LineCol(a.Module.Src, pos)
	return fielderr.New(Field, "line %d, column %d: %%%s: "+format, append([]any{line, col, in.Name}, args...)...)
}

// decode reads one collective instruction.
func (a *Analysis) decode(c *Computation, in *Instr, kind cost.Kind, model cost.Model, router *cost.Router) (Collective, error) {
	line, col := LineCol(a.Module.Src, in.Pos)
	out := Collective{Computation: c.Name, Name: in.Name, Opcode: in.Opcode, Kind: kind, Line: line, Column: col, Metadata: ParseMetadata(in.Attrs["metadata"])}
	if v, ok := in.Attr("channel_id"); ok {
		id, err := strconv.Atoi(v)
		if err != nil || id < 0 {
			return out, a.errAt(in, "channel_id", "channel_id must be a non-negative integer, got %q", clip(v))
		}
		out.ChannelID = id
	}
	if v, ok := in.Attr("dimensions"); ok {
		dims, err := Ints(v)
		if err != nil {
			return out, a.errAt(in, "dimensions", "dimensions: %v", err)
		}
		out.Dims = dims
	}
	var inBytes int64
	for _, op := range in.Operands {
		if d := c.Instr(op); d != nil {
			inBytes += d.Shape.Bytes()
		}
	}
	outShape := in.Shape
	if strings.HasSuffix(in.Opcode, "-start") && in.Shape.IsTuple() && len(in.Shape.Tuple) >= 2 && kind != cost.AllReduce {
		outShape = in.Shape.Tuple[1] // (operand, result, [contexts])
	}
	out.InBytes, out.OutBytes = inBytes, outShape.Bytes()
	if out.InBytes == 0 && len(in.Operands) == 0 {
		out.InBytes = out.OutBytes
	}
	n := a.Mesh.NumDevices()
	if kind == cost.CollectivePermute {
		return a.decodePermute(in, out, model, router)
	}
	text, _ := in.Attr("replica_groups")
	dg, ok := a.groups[text]
	if !ok {
		if a.work += n; a.work > a.maxWork {
			return out, a.errAt(in, "replica_groups", "the module's collectives have more than %d device entries to decode in all (distinct replica_groups times devices); audit a smaller module", a.maxWork)
		}
		var groups [][]int
		if text != "" {
			g, err := ParseGroups(text, n)
			if err != nil {
				return out, a.errAt(in, "replica_groups", "replica_groups: %v", err)
			}
			groups = g
		}
		dg = decodedGroups{size: n, count: 1}
		if len(groups) > 0 {
			dg.size, dg.count = len(groups[0]), len(groups)
		}
		if axes, err := GroupAxes(a.Mesh, groups); err != nil {
			dg.note = err.Error()
		} else {
			dg.axes = axes
		}
		if a.groups == nil {
			a.groups = map[string]decodedGroups{}
		}
		a.groups[text] = dg
	}
	out.GroupSize, out.GroupCount, out.MeshAxes, out.AxesNote = dg.size, dg.count, dg.axes, dg.note
	k := int64(out.GroupSize)
	cc := cost.Collective{Kind: kind, Mesh: a.Mesh, Axes: out.MeshAxes}
	switch kind {
	case cost.AllGather:
		cc.Bytes = out.OutBytes
		out.BytesPerDevice = out.OutBytes - out.OutBytes/k
	case cost.ReduceScatter:
		cc.Bytes = out.InBytes
		out.BytesPerDevice = (k - 1) * (out.InBytes / k)
	case cost.AllReduce:
		cc.Bytes = out.InBytes
		out.BytesPerDevice = 2 * (k - 1) * sharding.CeilDiv(out.InBytes, k)
	case cost.AllToAll, cost.AllToAllV:
		cc.Kind = cost.AllToAll
		cc.Bytes = k * out.InBytes
		out.BytesPerDevice = (k - 1) * (out.InBytes / k)
	}
	if k > 1 && model != nil {
		out.Cost = model.Estimate(cc)
	}
	return out, nil
}

func (a *Analysis) decodePermute(in *Instr, out Collective, model cost.Model, router *cost.Router) (Collective, error) {
	v, ok := in.Attr("source_target_pairs")
	if !ok {
		return out, a.errAt(in, "", "a collective-permute needs source_target_pairs={{source,target},...}")
	}
	n := a.Mesh.NumDevices()
	pairs, err := ParsePairs(v, n)
	if err != nil {
		return out, a.errAt(in, "source_target_pairs", "source_target_pairs: %v", err)
	}
	out.Pairs, out.GroupCount = pairs, len(pairs)
	out.GroupSize = 2
	axes, hops, err := PairAxes(a.Mesh, pairs)
	if err != nil {
		return out, a.errAt(in, "source_target_pairs", "source_target_pairs: %v", err)
	}
	out.MeshAxes = axes
	buf := out.InBytes
	moving := false
	for _, p := range pairs {
		if p[0] != p[1] {
			moving = true
		}
	}
	if !moving || model == nil {
		return out, nil
	}
	out.BytesPerDevice = buf
	if router != nil {
		mesh := a.Mesh
		from, to := make([]int, len(mesh.Axes)), make([]int, len(mesh.Axes))
		est := router.Price(&cost.Traffic{Kind: cost.CollectivePermute, Mesh: mesh, Each: func(yield func(from, to []int, bytes int64) bool) {
			for _, p := range pairs {
				if p[0] == p[1] {
					continue
				}
				mesh.Coords(mesh.PositionOf(p[0]), from)
				mesh.Coords(mesh.PositionOf(p[1]), to)
				if !yield(from, to, buf) {
					return
				}
			}
		}})
		out.Cost = est.Estimate
		return out, nil
	}
	out.Cost = model.Estimate(cost.Collective{Kind: cost.CollectivePermute, Bytes: buf, Mesh: a.Mesh, Axes: axes, Hops: hops})
	return out, nil
}

// ParseMetadata reads an instruction's metadata={...}: op_name="...",
// source_file="..." and source_line=N.
func ParseMetadata(text string) Metadata {
	var md Metadata
	text = strings.TrimSpace(text)
	text = strings.TrimSuffix(strings.TrimPrefix(text, "{"), "}")
	for text != "" {
		text = strings.TrimLeft(text, " ,")
		key, rest, ok := strings.Cut(text, "=")
		if !ok {
			break
		}
		key = strings.TrimSpace(key)
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(rest) {
				break
			}
			if s, err := strconv.Unquote(rest[:end+1]); err == nil {
				val = s
			} else {
				val = rest[1:end]
			}
			text = rest[end+1:]
		} else {
			end := strings.IndexAny(rest, " ,")
			if end < 0 {
				end = len(rest)
			}
			val, text = rest[:end], rest[end:]
		}
		switch key {
		case "op_name":
			md.OpName = val
		case "source_file":
			md.SourceFile = val
		case "source_line":
			md.SourceLine, _ = strconv.Atoi(val)
		}
	}
	return md
}

// TileCount reads the number of distinct tiles of an HloSharding text: the product of
// the tile assignment's dims less the trailing replication dims ({replicated} and
// {maximal ...} have one). ok is false when the text is not a tiled or replicated
// sharding it reads.
func TileCount(text string) (int, bool) {
	t := strings.TrimSpace(text)
	t = strings.TrimSuffix(strings.TrimPrefix(t, "{"), "}")
	t = strings.TrimSpace(t)
	if t == "replicated" || strings.HasPrefix(t, "maximal") {
		return 1, true
	}
	dims, ok := tileDims(t)
	if !ok || len(dims) == 0 {
		return 0, false
	}
	rest := t
	drop := 0
	if strings.Contains(rest, "last_tile_dim_replicate") {
		drop = 1
	} else if i := strings.Index(rest, "last_tile_dims={"); i >= 0 {
		inner := rest[i+len("last_tile_dims={"):]
		if j := strings.IndexByte(inner, '}'); j >= 0 {
			drop = len(strings.Split(inner[:j], ","))
		}
	}
	if drop >= len(dims) {
		return 1, true
	}
	n := 1
	for _, d := range dims[:len(dims)-drop] {
		n *= d
	}
	return n, true
}

// passThrough are the ops that keep a value's elements (and so its tiling) as they are.
var passThrough = map[string]bool{"copy": true, "bitcast": true, "reshape": true, "transpose": true, "convert": true, "copy-start": true, "copy-done": true, "all-gather-done": true}

// chain is what is known of a value on the way to a remat: how many tiles it is still
// split into and the gathers that made it.
type chain struct {
	tiles   int
	gathers []string
	source  string
	// sharding is the source's sharding= text.
	sharding string
	time     float64
	bytes    int64
}

// findRemats marks the gather chains that end in a whole tensor sliced by a
// dynamic-slice.
func (a *Analysis) findRemats() error {
	byName := map[string]*Collective{}
	for i := range a.Collectives {
		c := &a.Collectives[i]
		byName[c.Computation+"/"+c.Name] = c
	}
	devices := a.Mesh.NumDevices()
	for _, comp := range a.Module.Computations {
		state := map[string]*chain{}
		for _, in := range comp.Instrs {
			var src *chain
			if len(in.Operands) > 0 {
				src = state[in.Operands[0]]
			}
			switch {
			case in.Opcode == "parameter":
				if sh, ok := in.Attr("sharding"); ok {
					if t, ok := TileCount(sh); ok && t > 1 {
						state[in.Name] = &chain{tiles: t, source: in.Name, sharding: sh}
					}
				}
			case passThrough[in.Opcode] && src != nil:
				state[in.Name] = src
			case in.Opcode == "all-gather" || in.Opcode == "all-gather-start":
				col := byName[comp.Name+"/"+in.Name]
				if col == nil {
					continue
				}
				next := &chain{source: in.Name}
				if src != nil {
					*next = *src
					next.gathers = append(append([]string{}, src.gathers...), in.Name)
					if next.tiles%col.GroupSize != 0 {
						continue
					}
					next.tiles /= col.GroupSize
				} else {
					next.gathers = []string{in.Name}
					next.tiles = 0 // unknown, unless the group is every device
					if col.GroupSize == devices && devices > 1 {
						next.tiles = 1
					}
				}
				next.time += col.Cost.TimeUS
				next.bytes += col.BytesPerDevice
				state[in.Name] = next
			case in.Opcode == "dynamic-slice" || in.Opcode == "fusion":
				for i, op := range in.Operands {
					ch := state[op]
					if ch == nil || ch.tiles != 1 || len(ch.gathers) == 0 {
						continue
					}
					if in.Opcode == "fusion" && !a.fusionSlices(in, i) {
						continue
					}
					line, col := LineCol(a.Module.Src, in.Pos)
					shape := comp.Instr(op).Shape
					r := Remat{Computation: comp.Name, Gathers: ch.gathers, Slice: in.Name, Line: line, Column: col,
						Shape: shape, Source: ch.source, SourceSharding: ch.sharding, Metadata: ParseMetadata(in.Attrs["metadata"]),
						TimeUS: ch.time, BytesPerDevice: ch.bytes}
					a.readSides(&r, comp, in, i)
					a.Remats = append(a.Remats, r)
					for _, g := range ch.gathers {
						if c := byName[comp.Name+"/"+g]; c != nil {
							c.FullRematerialization = true
						}
					}
					break
				}
			}
		}
	}
	return nil
}

// fusionSlices reports whether the computation fusion in calls dynamic-slices its
// operand-th parameter (directly or through pass-through ops).
func (a *Analysis) fusionSlices(in *Instr, operand int) bool {
	callee := strings.TrimPrefix(strings.TrimSpace(in.Attrs["calls"]), "%")
	var comp *Computation
	for _, c := range a.Module.Computations {
		if c.Name == callee {
			comp = c
			break
		}
	}
	if comp == nil {
		return false
	}
	reach := map[string]bool{}
	for _, fi := range comp.Instrs {
		switch {
		case fi.Opcode == "parameter" && strings.TrimSpace(fi.Args) == strconv.Itoa(operand):
			reach[fi.Name] = true
		case passThrough[fi.Opcode] && len(fi.Operands) > 0 && reach[fi.Operands[0]]:
			reach[fi.Name] = true
		case (fi.Opcode == "dynamic-slice" || fi.Opcode == "slice") && len(fi.Operands) > 0 && reach[fi.Operands[0]]:
			return fi.Opcode == "dynamic-slice"
		}
	}
	return false
}

// readSides fills r.From and r.To where both shardings read on the mesh.
func (a *Analysis) readSides(r *Remat, comp *Computation, slice *Instr, operand int) {
	if a.work += a.Mesh.NumDevices() * max(1, len(r.Shape.Dims)); a.work > a.maxWork {
		r.Note = "not read: the module has more remats than the decoding budget covers"
		return
	}
	if r.SourceSharding == "" {
		r.Note = "the chain's source has no sharding= to read"
		return
	}
	from, err := sharding.ParseHLO(r.SourceSharding, a.Mesh, r.Shape.Dims, "source")
	if err != nil {
		r.Note = "the source's sharding does not read on the mesh: " + err.Error()
		return
	}
	to, err := a.inferTarget(comp, slice, operand, r.Shape.Dims)
	if err != nil {
		r.Note = "the target sharding does not read: " + err.Error()
		return
	}
	r.From, r.To = &from, &to
}

// Parameter is an entry parameter of the module with its sharding.
type Parameter struct {
	Name string
	// Shape is one device's buffer; GlobalShape the whole tensor (Shape times the tile
	// counts of its sharding; nil when the sharding does not tell them).
	Shape       Shape
	GlobalShape []int64
	Sharding    string
	// Read is the sharding on the mesh (nil when it does not read there).
	Read *sharding.Sharding
}

// Parameters lists the entry computation's parameters, read onto the mesh.
func (a *Analysis) Parameters() []Parameter {
	var out []Parameter
	for _, in := range a.Module.Entry.Instrs {
		if in.Opcode != "parameter" {
			continue
		}
		p := Parameter{Name: in.Name, Shape: in.Shape, Sharding: in.Attrs["sharding"]}
		if t, ok := TileCount(p.Sharding); ok && t == 1 && !in.Shape.IsTuple() {
			p.GlobalShape = in.Shape.Dims // replicated (or one tile)
			if s, err := sharding.ParseHLO(p.Sharding, a.Mesh, p.GlobalShape, "sharding"); err == nil {
				p.Read = &s
			}
		} else if dims, ok := tileDims(p.Sharding); ok && len(dims) >= len(in.Shape.Dims) && !in.Shape.IsTuple() {
			p.GlobalShape = make([]int64, len(in.Shape.Dims))
			for d, n := range in.Shape.Dims {
				p.GlobalShape[d] = n * int64(dims[d])
			}
			if s, err := sharding.ParseHLO(p.Sharding, a.Mesh, p.GlobalShape, "sharding"); err == nil {
				p.Read = &s
			}
		}
		out = append(out, p)
	}
	return out
}

// tileDims reads the tile assignment dims of {devices=[...]...}.
func tileDims(text string) ([]int, bool) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(text), "{"), "}"))
	if t == "replicated" {
		return nil, false
	}
	rest, ok := strings.CutPrefix(t, "devices=[")
	if !ok {
		return nil, false
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return nil, false
	}
	dims, err := intList(rest[:end], 1<<30)
	return dims, err == nil
}
