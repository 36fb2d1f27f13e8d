package hlo

import (
	"context"
	"fmt"
	"regexp"
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
	// Mesh is the request's mesh (nil: inferred from the module, see InferMesh).
	Mesh *sharding.Mesh
	// MeshField names Mesh in errors ("mesh").
	MeshField string
	Model     cost.Model
	// MaxDecodeWork bounds the device entries decoded (0: DefaultMaxDecodeWork).
	MaxDecodeWork int
	// MaxDevices bounds the devices inferred from the module (0: DefaultLimits').
	MaxDevices int
}

// Collective is one collective instruction of the module, decoded and priced.
type Collective struct {
	Computation string
	Name        string // instruction name without '%'
	Opcode      string // as printed: all-gather, all-gather-start, reduce-scatter-start, send, ...
	Kind        cost.Kind
	Line        int
	Column      int
	Metadata    Metadata
	// Location is the stack frame of its metadata's stack_frame_id, when the module's
	// tables hold it.
	Location  *SourceLocation
	ChannelID int // 0 when absent
	// Dims is the gather, scatter or split dimension(s) (all-gather, reduce-scatter,
	// array all-to-all).
	Dims []int64
	// GroupSize and GroupCount: the device groups (collective-permute: the pairs).
	GroupSize  int
	GroupCount int
	Pairs      [][2]int
	// MeshAxes are the axes the groups run over (collective-permute: the axes on which
	// some pair moves), major to minor; AxesNote says why they are missing when the
	// groups match no axes of the mesh (the collective is then priced on its device
	// groups as they are, as a ring of GroupSize devices).
	MeshAxes []sharding.AxisRef
	AxesNote string
	// InBytes and OutBytes are one device's buffers; BytesPerDevice what the busiest
	// device receives in one execution (ring volumes for reductions, as the reshard
	// planner counts).
	InBytes, OutBytes int64
	BytesPerDevice    int64
	// Cost is one execution's estimate.
	Cost cost.Estimate
	// TripCount is how many times the instruction runs per execution of the module
	// (the trip counts of the while loops around it multiplied); TripCountKnown is
	// false when a loop's count is not known, which is then counted once.
	TripCount      int64
	TripCountKnown bool
	TripCountNote  string
	// FullRematerialization: this gather is part of a chain that makes the whole
	// tensor on every device, which a dynamic-slice then cuts (see Remat).
	FullRematerialization bool
}

// TimeUS is the collective's time over every run of it: one execution's times its
// trip count.
func (c *Collective) TimeUS() float64 { return c.Cost.TimeUS * float64(max(c.TripCount, 1)) }

// TotalBytesPerDevice is BytesPerDevice over every run of it.
func (c *Collective) TotalBytesPerDevice() int64 { return c.BytesPerDevice * max(c.TripCount, 1) }

// Unmodeled is an instruction that communicates but is not priced, and why.
type Unmodeled struct {
	Computation string
	Name        string
	Opcode      string
	Line        int
	Column      int
	Reason      string
}

// Metadata is what an instruction's metadata={...} says of its origin.
type Metadata struct {
	OpName       string
	SourceFile   string
	SourceLine   int
	StackFrameID int
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
	// Unmodeled are the instructions that communicate but are not priced.
	Unmodeled []Unmodeled
	// Devices is the module's device count and DevicesNote what says so.
	Devices     int
	DevicesNote string
	// MeshSource says where Mesh comes from (MeshFromRequest, MeshFromNamedMesh,
	// MeshFromShardings, MeshOneAxis) and MeshNote why.
	MeshSource, MeshNote string
	// TimeUS and BytesPerDevice sum every collective over its runs (no overlap assumed).
	TimeUS         float64
	BytesPerDevice int64

	// groups memoizes the decoding of each replica_groups text (a module repeats a few).
	groups map[string]decodedGroups
	// work counts the device entries decoded, against maxWork.
	work, maxWork int
	// partitions is the module's partition count: the header's, else what its
	// cross-replica-and-partition gathers and scatters show (1 when nothing does).
	partitions int
	// rings are one-axis meshes of a group size, to price groups that match no axes.
	rings map[int]*sharding.Mesh
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

// collectiveOps maps the opcodes of the collectives Analyze prices to their kinds:
// the synchronous ones, their "-start" forms (async-start wrappers print as
// "<op>-start"; "-done" ones are part of their start), and send and recv.
var collectiveOps = map[string]cost.Kind{
	"all-gather": cost.AllGather, "all-gather-start": cost.AllGather,
	"all-reduce": cost.AllReduce, "all-reduce-start": cost.AllReduce,
	"reduce-scatter": cost.ReduceScatter, "reduce-scatter-start": cost.ReduceScatter,
	"all-to-all": cost.AllToAll, "all-to-all-start": cost.AllToAll,
	"ragged-all-to-all": cost.AllToAllV, "ragged-all-to-all-start": cost.AllToAllV,
	"collective-permute": cost.CollectivePermute, "collective-permute-start": cost.CollectivePermute,
	"send": cost.CollectivePermute, "recv": cost.CollectivePermute,
	"send-start": cost.CollectivePermute, "recv-start": cost.CollectivePermute,
}

// isP2P reports whether op is a send or recv (or their sugared async starts).
func isP2P(op string) bool {
	return op == "send" || op == "recv" || op == "send-start" || op == "recv-start"
}

// unmodeledOps are the opcodes that communicate but have no price, and why.
var unmodeledOps = map[string]string{
	"collective-broadcast":       "no cost model for collective-broadcast (one device's buffer to its group)",
	"collective-broadcast-start": "no cost model for collective-broadcast (one device's buffer to its group)",
	"infeed":                     "host transfers (infeed) are not priced",
	"outfeed":                    "host transfers (outfeed) are not priced",
}

// collectiveCallRE matches custom-call targets that communicate.
var collectiveCallRE = regexp.MustCompile(`(?i)(all[-_]?reduce|all[-_]?gather|reduce[-_]?scatter|all[-_]?to[-_]?all|collective|permute|nccl)`)

// Analyze decodes every collective of m onto the mesh (opts.Mesh, checked against the
// module's devices and parameters' shardings; else inferred, see InferMesh), prices it
// with opts.Model times the trip counts of the loops around it, lists what
// communicates without a price under Unmodeled, and finds the full-rematerialization
// chains. Errors are *fielderr.FieldError: on Field (naming the line and column) for
// attributes that do not parse, on opts.MeshField when the mesh does not fit the
// module; or ctx's error.
func Analyze(ctx context.Context, m *Module, opts Options) (*Analysis, error) {
	maxDevices := opts.MaxDevices
	if maxDevices <= 0 {
		maxDevices = DefaultLimits().MaxDevices
	}
	devices, devicesNote, err := m.Devices(ctx, maxDevices)
	if err != nil {
		return nil, err
	}
	field := opts.MeshField
	if field == "" {
		field = "mesh"
	}
	if mesh := opts.Mesh; mesh != nil && !m.ReplicasGiven && mesh.NumDevices() > devices && mesh.NumDevices()%devices == 0 {
		// Without a replica count the module's groups give a lower bound on its devices
		// (torch_xla prints none); the request's mesh says how many it runs on.
		devicesNote = fmt.Sprintf("the request's mesh of %d devices: the header gives no replica_count, and %s gives %d", mesh.NumDevices(), devicesNote, devices)
		devices = mesh.NumDevices()
	}
	a := &Analysis{Module: m, Devices: devices, DevicesNote: devicesNote, maxWork: opts.MaxDecodeWork}
	if a.maxWork <= 0 {
		a.maxWork = DefaultMaxDecodeWork
	}
	a.partitions = m.partitionCount(devices)
	inferred, source, note, err := m.InferMesh(ctx, devices, maxDevices)
	if err != nil {
		return nil, err
	}
	if opts.Mesh == nil {
		a.Mesh, a.MeshSource, a.MeshNote = inferred, source, note
	} else {
		if err := a.checkMesh(opts.Mesh, inferred, field); err != nil {
			return nil, err
		}
		a.Mesh, a.MeshSource, a.MeshNote = opts.Mesh, MeshFromRequest, "the request's mesh"
	}
	var router *cost.Router
	if f, ok := opts.Model.(*cost.Fabric); ok {
		router = f.NewRouter(a.Mesh)
	}
	runs := m.ComputationRuns()
	sent := map[int]bool{} // channel ids of the sends priced
	for _, c := range m.Computations {
		for _, in := range c.Instrs {
			if (in.Opcode == "send" || in.Opcode == "send-start") && !hostTransfer(in) {
				if id, err := strconv.Atoi(in.Attrs["channel_id"]); err == nil {
					sent[id] = true
				}
			}
		}
	}
	count := 0
	for _, c := range m.Computations {
		r := runs[c]
		for _, in := range c.Instrs {
			if count++; count%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if reason, ok := a.unmodeled(in); ok {
				line, col := m.LineCol(in.Pos)
				a.Unmodeled = append(a.Unmodeled, Unmodeled{Computation: c.Name, Name: in.Name, Opcode: in.Opcode, Line: line, Column: col, Reason: reason})
				continue
			}
			kind, ok := collectiveOps[in.Opcode]
			if !ok {
				continue
			}
			if in.Opcode == "recv" || in.Opcode == "recv-start" { // priced at its send, when the module has it
				if id, err := strconv.Atoi(in.Attrs["channel_id"]); err == nil && sent[id] {
					continue
				}
			}
			col, err := a.decode(c, in, kind, opts.Model, router)
			if err != nil {
				return nil, err
			}
			col.TripCount, col.TripCountKnown = max(r.Count, 1), r.Known
			if !r.Known {
				col.TripCountNote = "the trip count of while %" + r.Unknown + " is not known: counted once"
			}
			a.Collectives = append(a.Collectives, col)
		}
	}
	if err := a.findRemats(ctx); err != nil {
		return nil, err
	}
	for i := range a.Collectives {
		a.TimeUS += a.Collectives[i].TimeUS()
		a.BytesPerDevice += a.Collectives[i].TotalBytesPerDevice()
	}
	return a, nil
}

// hostTransfer reports whether a send or recv moves data to or from the host
// (is_host_transfer=true), not between devices.
func hostTransfer(in *Instr) bool {
	return strings.TrimSpace(in.Attrs["is_host_transfer"]) == "true"
}

// unmodeled reports whether in communicates without a price here, and why.
func (a *Analysis) unmodeled(in *Instr) (string, bool) {
	if r, ok := unmodeledOps[in.Opcode]; ok {
		return r, true
	}
	if isP2P(in.Opcode) && hostTransfer(in) {
		return "host transfers (" + in.Opcode + " with is_host_transfer=true) are not priced", true
	}
	if in.Opcode == "custom-call" {
		target := strings.Trim(in.Attrs["custom_call_target"], `"`)
		if collectiveCallRE.MatchString(target) {
			return "custom-call " + strconv.Quote(target) + " may communicate; custom calls are not priced", true
		}
	}
	if base, phase := asyncBase(in.Opcode); phase == "start" {
		if _, priced := collectiveOps[in.Opcode]; !priced && base != "" {
			if _, comm := unmodeledOps[base]; comm {
				return unmodeledOps[base], true
			}
		}
	}
	return "", false
}

// checkMesh checks the request's mesh against the module: its device count, and that
// every entry parameter's sharding reads on it. A mismatch names the mesh that fits.
func (a *Analysis) checkMesh(mesh, inferred *sharding.Mesh, field string) error {
	m := a.Module
	fits := fmt.Sprintf("a mesh that fits: %s (%s)", meshText(inferred), "its axes read off the module's shardings")
	if !a.fromShardings(inferred) {
		fits = fmt.Sprintf("give a mesh of %d devices, or none", a.Devices)
	}
	if mesh.NumDevices() != a.Devices {
		return fielderr.New(field, "the mesh %s has %d devices; the module runs on %d (%s): %s", meshText(mesh), mesh.NumDevices(), a.Devices, a.DevicesNote, fits)
	}
	for _, in := range m.Entry.Instrs {
		if in.Opcode != "parameter" || in.Shape.IsTuple() {
			continue
		}
		sh, ok := in.Attrs["sharding"]
		if !ok {
			continue
		}
		dims, ok := tileDims(sh)
		if !ok || len(dims) < len(in.Shape.Dims) {
			continue
		}
		global := make([]int64, len(in.Shape.Dims))
		for d, n := range in.Shape.Dims {
			global[d] = n * int64(dims[d])
		}
		line, _ := m.LineCol(in.Pos)
		if _, err := sharding.ParseHLO(sh, mesh, global, "sharding"); err != nil {
			return fielderr.New(field, "the mesh %s does not fit parameter %%%s's sharding %s (line %d): %v; %s", meshText(mesh), in.Name, clip(sh), line, err, fits)
		}
		if axes, ok := shardingAxes(sh); ok && !refines(meshSizes(mesh), axes) {
			return fielderr.New(field, "the mesh %s does not fit parameter %%%s's sharding %s (line %d): its devices are laid out over axes of sizes %v, which the mesh's axes do not split into (in order, minor last); %s", meshText(mesh), in.Name, clip(sh), line, axes, fits)
		}
	}
	return nil
}

func (a *Analysis) fromShardings(m *sharding.Mesh) bool { return len(m.Axes) > 1 }

func meshText(m *sharding.Mesh) string {
	parts := make([]string, len(m.Axes))
	for i, ax := range m.Axes {
		parts[i] = fmt.Sprintf("%s=%d", ax.Name, ax.Size)
	}
	return strings.Join(parts, ",")
}

func (a *Analysis) errAt(in *Instr, attr string, format string, args ...any) error {
	pos := in.Pos
	if p, ok := in.AttrPos[attr]; ok {
		pos = p
	}
	line, col := a.Module.LineCol(pos)
	return fielderr.New(Field, "line %d, column %d: %%%s: "+format, append([]any{line, col, in.Name}, args...)...)
}

// ring is a one-axis mesh of k devices, to price groups that match no axes of the mesh.
func (a *Analysis) ring(k int) *sharding.Mesh {
	if m, ok := a.rings[k]; ok {
		return m
	}
	m, err := sharding.NewMesh("group", []sharding.Axis{{Name: "group", Size: k}}, nil)
	if err != nil {
		return nil
	}
	if a.rings == nil {
		a.rings = map[int]*sharding.Mesh{}
	}
	a.rings[k] = m
	return m
}

// decode reads one collective instruction.
func (a *Analysis) decode(c *Computation, in *Instr, kind cost.Kind, model cost.Model, router *cost.Router) (Collective, error) {
	line, col := a.Module.LineCol(in.Pos)
	out := Collective{Computation: c.Name, Name: in.Name, Opcode: in.Opcode, Kind: kind, Line: line, Column: col, Metadata: ParseMetadata(in.Attrs["metadata"])}
	if id := out.Metadata.StackFrameID; id > 0 {
		if loc, ok := a.Module.Frames.Resolve(id); ok {
			out.Location = &loc
		}
	}
	if v, ok := in.Attr("channel_id"); ok {
		id, err := strconv.Atoi(v)
		if err != nil || id < 0 {
			return out, a.errAt(in, "channel_id", "channel_id must be a non-negative integer, got %q", clip(v))
		}
		out.ChannelID = id
	}
	var inBytes int64
	var inShape *Shape
	for _, op := range in.Operands {
		if d := c.Instr(op); d != nil {
			inBytes += d.Shape.Bytes()
			if inShape == nil {
				inShape = &d.Shape
			}
		}
	}
	switch {
	case kind == cost.AllToAllV && len(in.Operands) == 6:
		// ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets,
		// recv_sizes): what moves is (at most) the input buffer.
		inBytes = 0
		if d := c.Instr(in.Operands[0]); d != nil {
			inBytes = d.Shape.Bytes()
		}
	case kind == cost.CollectivePermute && !isP2P(in.Opcode):
		if moved, ok := inPlaceBytes(c, in); ok {
			inBytes = moved
		}
	}
	outShape := in.Shape
	if strings.HasSuffix(in.Opcode, "-start") && in.Shape.IsTuple() && len(in.Shape.Tuple) >= 2 && kind != cost.AllReduce {
		outShape = in.Shape.Tuple[1] // (operand(s), result, [contexts])
	}
	if isP2P(in.Opcode) {
		outShape = Shape{}
		buf := in.Shape // (buffer, u32[] context, token[]); an async start wraps it: ((operands), (buffer, ...), s32[])
		if strings.HasSuffix(in.Opcode, "-start") && buf.IsTuple() && len(buf.Tuple) > 1 {
			buf = buf.Tuple[1]
		}
		if buf.IsTuple() && len(buf.Tuple) > 0 {
			outShape = buf.Tuple[0]
		}
		if strings.HasPrefix(in.Opcode, "send") && len(in.Operands) > 0 {
			inBytes = 0
			if d := c.Instr(in.Operands[0]); d != nil {
				inBytes = d.Shape.Bytes()
			}
		} else {
			inBytes = outShape.Bytes()
		}
	}
	if v, ok := in.Attr("dimensions"); ok {
		dims, err := Ints(v)
		if err != nil {
			return out, a.errAt(in, "dimensions", "dimensions: %v", err)
		}
		rank := len(outShape.Dims)
		if inShape != nil && !inShape.IsTuple() {
			rank = max(rank, len(inShape.Dims))
		}
		for _, d := range dims {
			if !outShape.IsTuple() && (d < 0 || d >= int64(rank)) {
				return out, a.errAt(in, "dimensions", "dimensions: %d is not a dimension of the rank-%d operand; dimensions are 0 to %d", d, rank, rank-1)
			}
		}
		out.Dims = dims
	}
	out.InBytes, out.OutBytes = inBytes, outShape.Bytes()
	if out.InBytes == 0 && len(in.Operands) == 0 {
		out.InBytes = out.OutBytes
	}
	n := a.Mesh.NumDevices()
	if isP2P(in.Opcode) {
		return a.decodeSendRecv(in, out, model, router)
	}
	if kind == cost.CollectivePermute {
		return a.decodePermute(in, out, model, router)
	}
	text, _ := in.Attr("replica_groups")
	crp := crossReplicaAndPartition(in, kind)
	key := text
	if crp {
		key = "crp:" + text
	}
	dg, ok := a.groups[key]
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
		crpNote := ""
		if crp && len(groups) > 0 {
			groups, crpNote = a.acrossPartitions(groups)
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
		dg.note = joinNotes(crpNote, dg.note)
		if a.groups == nil {
			a.groups = map[string]decodedGroups{}
		}
		a.groups[key] = dg
	}
	out.GroupSize, out.GroupCount, out.MeshAxes, out.AxesNote = dg.size, dg.count, dg.axes, dg.note
	if out.GroupSize == 1 && out.AxesNote == "" {
		out.AxesNote = "groups of one device: nothing moves"
	}
	k := int64(out.GroupSize)
	cc := cost.Collective{Kind: kind, Mesh: a.Mesh, Axes: out.MeshAxes}
	if out.MeshAxes == nil && k > 1 {
		// Groups that match no axes of the mesh are priced on their devices as they are.
		if ring := a.ring(out.GroupSize); ring != nil {
			cc.Mesh, cc.Axes = ring, []sharding.AxisRef{sharding.FullAxis(ring.Axes[0])}
			out.AxesNote += fmt.Sprintf("; priced on its groups of %d devices as a ring", out.GroupSize)
		}
	}
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

// decodeSendRecv prices a send (or a recv whose send the module does not hold) as a
// point-to-point transfer: over the pairs its frontend attributes list
// (_xla_send_recv_source_target_pairs), else one neighbour hop.
func (a *Analysis) decodeSendRecv(in *Instr, out Collective, model cost.Model, router *cost.Router) (Collective, error) {
	fa := in.Attrs["frontend_attributes"]
	if i := strings.Index(fa, "_xla_send_recv_source_target_pairs="); i >= 0 {
		v := fa[i+len("_xla_send_recv_source_target_pairs="):]
		v = strings.Trim(strings.TrimSpace(v), `"`)
		if end := strings.Index(v, "}}"); end >= 0 {
			v = v[:end+2]
		}
		in2 := *in
		in2.Attrs = map[string]string{"source_target_pairs": v}
		in2.AttrPos = map[string]int{"source_target_pairs": in.AttrPos["frontend_attributes"]}
		return a.decodePermute(&in2, out, model, router)
	}
	out.GroupSize, out.GroupCount = 2, 1
	out.AxesNote = "no _xla_send_recv_source_target_pairs: priced as one transfer to a neighbour"
	out.BytesPerDevice = out.InBytes
	if model != nil && out.InBytes > 0 {
		ring := a.ring(2)
		if ring != nil {
			out.Cost = model.Estimate(cost.Collective{Kind: cost.CollectivePermute, Bytes: out.InBytes, Mesh: ring, Axes: []sharding.AxisRef{sharding.FullAxis(ring.Axes[0])}, Hops: 1})
		}
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
		case "stack_frame_id":
			md.StackFrameID, _ = strconv.Atoi(val)
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
func (a *Analysis) findRemats(ctx context.Context) error {
	byName := map[string]*Collective{}
	for i := range a.Collectives {
		c := &a.Collectives[i]
		byName[c.Computation+"/"+c.Name] = c
	}
	devices := a.Mesh.NumDevices()
	for _, comp := range a.Module.Computations {
		state := map[string]*chain{}
		if err := ctx.Err(); err != nil {
			return err
		}
		for i, in := range comp.Instrs {
			if i%4096 == 4095 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
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
				next.time += col.TimeUS()
				next.bytes += col.TotalBytesPerDevice()
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
					line, col := a.Module.LineCol(in.Pos)
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
	comp := a.Module.Computation(in.Attrs["calls"])
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

// crossReplicaAndPartition reports whether in's replica_groups list replica ids that
// run across every partition: an all-reduce, all-gather or reduce-scatter with a
// channel_id and without use_global_device_ids=true (XLA's
// CollectiveOpGroupMode::kCrossReplicaAndPartition).
func crossReplicaAndPartition(in *Instr, kind cost.Kind) bool {
	switch kind {
	case cost.AllReduce, cost.AllGather, cost.ReduceScatter:
	default:
		return false
	}
	if _, ok := in.Attrs["channel_id"]; !ok {
		return false
	}
	return strings.TrimSpace(in.Attrs["use_global_device_ids"]) != "true"
}

// acrossPartitions expands groups of replica ids to the devices they run on in
// cross-replica-and-partition mode: every listed replica in every partition (device
// replica*num_partitions+partition, the flattened id). Groups whose ids are not all
// replicas of the module (or a module of one partition) stay as they are.
func (a *Analysis) acrossPartitions(groups [][]int) ([][]int, string) {
	p := a.partitions
	if p <= 1 {
		return groups, ""
	}
	replicas := a.Devices / p
	for _, g := range groups {
		for _, r := range g {
			if r >= replicas {
				return groups, ""
			}
		}
	}
	out := make([][]int, len(groups))
	for i, g := range groups {
		out[i] = make([]int, 0, len(g)*p)
		for _, r := range g {
			for q := range p {
				out[i] = append(out[i], r*p+q)
			}
		}
	}
	return out, fmt.Sprintf("channel_id without use_global_device_ids: the listed replicas run across all %d partitions", p)
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// inPlaceBytes is what an in-place collective-permute(input, output, input_offsets,
// output_offsets) moves: its slice_sizes of the input (at most the input buffer), not
// its four operands. ok is false for the other forms.
func inPlaceBytes(c *Computation, in *Instr) (int64, bool) {
	if len(in.Operands) != 4 {
		return 0, false
	}
	sizes, hasSizes := in.Attrs["slice_sizes"]
	if !hasSizes {
		idx := c.Instr(in.Operands[2])
		if idx == nil || !indexShape(idx.Shape) {
			return 0, false
		}
	}
	src := c.Instr(in.Operands[0])
	if src == nil {
		return 0, true
	}
	whole := src.Shape.Bytes()
	if !hasSizes || src.Shape.IsTuple() {
		return whole, true
	}
	var moved int64
	inner := strings.TrimSpace(sizes)
	inner = strings.TrimSuffix(strings.TrimPrefix(inner, "{"), "}")
	for part := range strings.SplitSeq(inner, "}") {
		part = strings.Trim(strings.TrimSpace(part), ",{ ")
		if part == "" {
			continue
		}
		dims, err := Ints("{" + part + "}")
		if err != nil {
			return whole, true
		}
		n := int64(1)
		for _, d := range dims {
			if d < 0 || d > 1<<40 || d > 0 && n > (1<<62)/d {
				return whole, true
			}
			n *= d
		}
		moved += sharding.BufferBytes(n, ElemBits(src.Shape.Elem))
		if moved >= whole {
			return whole, true
		}
	}
	return moved, true
}

// indexShape reports whether s holds start indices: an integer array or a tuple of
// integer scalars.
func indexShape(s Shape) bool {
	if s.IsTuple() {
		for _, t := range s.Tuple {
			if !indexShape(t) {
				return false
			}
		}
		return len(s.Tuple) > 0
	}
	return strings.HasPrefix(s.Elem, "s") || strings.HasPrefix(s.Elem, "u")
}
