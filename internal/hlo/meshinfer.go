package hlo

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Where the mesh of an analysis comes from (Analysis.MeshSource).
const (
	MeshFromRequest   = "request"
	MeshFromNamedMesh = "replica_groups"
	MeshFromShardings = "shardings"
	MeshOneAxis       = "devices"
)

// tileRE reads an HloSharding's tile assignment: devices=[dims] then an iota
// <=[reshape] with an optional T(perm), or the ids.
var tileRE = regexp.MustCompile(`devices=\[([0-9,]+)\](<=\[([0-9,]+)\](T\(([0-9,]+)\))?)?`)

// iotaGroupsRE reads the reshape of iota replica groups [G,S]<=[dims].
var iotaGroupsRE = regexp.MustCompile(`^\[[0-9,]+\]<=\[([0-9,]+)\]`)

// Devices is the number of devices the module runs on: num_partitions times
// replica_count when the header gives either, else the most any replica groups,
// source-target pairs, named mesh or sharding covers (at least 1), and what said so.
func (m *Module) Devices(ctx context.Context, maxDevices int) (int, string, error) {
	if m.CountsGiven && m.ReplicasGiven {
		return m.NumPartitions * m.NumReplicas, "the header's num_partitions and replica_count", nil
	}
	n, why := 1, "no collective or sharding names more than one device"
	if m.CountsGiven {
		n, why = m.NumPartitions, "the header's num_partitions"
	}
	see := func(k int, what string) {
		if k > n && k <= maxDevices {
			n, why = k, what
		}
	}
	count := 0
	for _, c := range m.Computations {
		for _, in := range c.Instrs {
			if count++; count%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return 0, "", err
				}
			}
			if v := strings.TrimSpace(in.Attrs["replica_groups"]); v == "" || v == "{}" {
				// Groups of every device: an all-gather's (or reduce-scatter's)
				// shapes say how many.
				if k := shapeRatio(c, in); k > 1 {
					see(k, "the shapes of %"+in.Name+" (a group of every device)")
				}
			}
			if v, ok := in.Attrs["replica_groups"]; ok {
				v = strings.TrimSpace(v)
				switch {
				case strings.HasPrefix(v, "mesh["):
					if nm, err := ParseNamedMesh(v, maxDevices); err == nil {
						see(nm.NumDevices(), "the named mesh of %"+in.Name+"'s replica_groups")
					}
				case strings.HasPrefix(v, "["):
					if mm := iotaGroupsRE.FindStringSubmatch(v); mm != nil {
						see(product(mm[1]), "the iota replica_groups of %"+in.Name)
					}
				default:
					see(maxID(v)+1, "the device ids of %"+in.Name+"'s replica_groups")
				}
			}
			if p := crpPartitions(c, in); p > 1 {
				if v := strings.TrimSpace(in.Attrs["replica_groups"]); strings.HasPrefix(v, "{") {
					see((maxID(v)+1)*p, "the shapes of %"+in.Name+" (its listed replicas run across every partition: channel_id without use_global_device_ids)")
				}
			}
			if v, ok := in.Attrs["source_target_pairs"]; ok {
				see(maxID(v)+1, "the device ids of %"+in.Name+"'s source_target_pairs")
			}
			if v := in.Attrs["frontend_attributes"]; strings.Contains(v, "_xla_send_recv_source_target_pairs=") {
				_, pairs, _ := strings.Cut(v, "_xla_send_recv_source_target_pairs=")
				if end := strings.Index(pairs, "}}"); end >= 0 {
					pairs = pairs[:end]
				}
				see(maxID(pairs)+1, "the device ids of %"+in.Name+"'s _xla_send_recv_source_target_pairs")
			}
			if v, ok := in.Attrs["sharding"]; ok {
				for _, mm := range tileRE.FindAllStringSubmatch(v, -1) {
					see(product(mm[1]), "the tile assignment of %"+in.Name+"'s sharding")
				}
				if i := strings.Index(v, "maximal device="); i >= 0 {
					see(maxID(v[i+len("maximal device="):])+1, "%"+in.Name+"'s maximal sharding")
				}
			}
		}
	}
	if m.CountsGiven && n > m.NumPartitions && n%m.NumPartitions != 0 {
		// Not a whole number of replicas: the header's count stands (and the ids past
		// it are refused where they are listed).
		n, why = m.NumPartitions, "the header's num_partitions"
	}
	if m.CountsGiven && n > m.NumPartitions {
		why = fmt.Sprintf("the header gives num_partitions=%d and no replica_count; %s, so the module runs on %d devices (replicas times partitions)", m.NumPartitions, why, n)
	}
	return n, why, nil
}

// product multiplies a comma-separated list of sizes (0 if one does not read).
func product(list string) int {
	n := 1
	for s := range strings.SplitSeq(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 1 || n > 1<<30 {
			return 0
		}
		n *= v
	}
	return n
}

// maxID is the largest integer in text (-1 if none), reading at most the first 1<<20
// digits of numbers.
func maxID(text string) int {
	best, cur, in := -1, 0, false
	for i := 0; i <= len(text); i++ {
		if i < len(text) && text[i] >= '0' && text[i] <= '9' {
			if cur < 1<<30 {
				cur = cur*10 + int(text[i]-'0')
			}
			in = true
			continue
		}
		if in {
			best = max(best, cur)
		}
		cur, in = 0, false
	}
	return best
}

// InferMesh infers the module's mesh when the request gives none: the named mesh of its
// replica groups, else the axes the shardings' tile assignments show (the iota's
// reshape dims, or the tile dims of a plain iota: the finest that covers every device),
// else one axis DefaultAxis of every device. It says which and why.
func (m *Module) InferMesh(ctx context.Context, devices, maxDevices int) (*sharding.Mesh, string, string, error) {
	var bestNames []string
	var bestSizes []int
	source, why := MeshOneAxis, fmt.Sprintf("nothing in the module names mesh axes: one axis %q of its %d devices", DefaultAxis, devices)
	consider := func(names []string, sizes []int, src, what string) {
		var ns []string
		var ss []int
		for i, s := range sizes {
			if s > 1 {
				ss = append(ss, s)
				if names != nil {
					ns = append(ns, names[i])
				}
			}
		}
		if len(ss) < 2 || prodInts(ss) != devices {
			return
		}
		better := len(ss) > len(bestSizes)
		if src == MeshFromNamedMesh && source != MeshFromNamedMesh {
			better = true
		} else if source == MeshFromNamedMesh && src != MeshFromNamedMesh {
			better = false
		}
		if better {
			bestNames, bestSizes, source, why = ns, ss, src, what
		}
	}
	count := 0
	for _, c := range m.Computations {
		for _, in := range c.Instrs {
			if count++; count%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, "", "", err
				}
			}
			if v := strings.TrimSpace(in.Attrs["replica_groups"]); strings.HasPrefix(v, "mesh[") {
				if nm, err := ParseNamedMesh(v, maxDevices); err == nil && nm.DeviceIDs == nil {
					consider(nm.Names, nm.Sizes, MeshFromNamedMesh, "the named mesh of %"+in.Name+"'s replica_groups ("+clip(v)+")")
				}
			} else if mm := iotaGroupsRE.FindStringSubmatch(v); mm != nil {
				consider(nil, ints(mm[1]), MeshFromShardings, "the iota reshape ["+mm[1]+"] of %"+in.Name+"'s replica_groups")
			}
			v, ok := in.Attrs["sharding"]
			if !ok {
				continue
			}
			for _, mm := range tileRE.FindAllStringSubmatch(v, -1) {
				switch {
				case mm[3] != "" && strings.Contains(mm[3], ","):
					consider(nil, ints(mm[3]), MeshFromShardings, "the iota reshape ["+mm[3]+"] of %"+in.Name+"'s sharding "+clip(mm[0]))
				case mm[2] != "":
					consider(nil, ints(mm[1]), MeshFromShardings, "the tile dims ["+mm[1]+"] of %"+in.Name+"'s sharding "+clip(mm[0]))
				}
			}
		}
	}
	if bestSizes == nil {
		mesh, err := sharding.NewMesh(sharding.DefaultMeshName, []sharding.Axis{{Name: DefaultAxis, Size: devices}}, nil)
		return mesh, source, why, err
	}
	axes := make([]sharding.Axis, len(bestSizes))
	for i, s := range bestSizes {
		name := fmt.Sprintf("axis_%d", i)
		if bestNames != nil {
			name = bestNames[i]
		}
		axes[i] = sharding.Axis{Name: name, Size: s}
	}
	mesh, err := sharding.NewMesh(sharding.DefaultMeshName, axes, nil)
	if err != nil {
		mesh, err = sharding.NewMesh(sharding.DefaultMeshName, []sharding.Axis{{Name: DefaultAxis, Size: devices}}, nil)
		return mesh, MeshOneAxis, "the inferred axes do not make a mesh; one axis of every device", err
	}
	return mesh, source, "inferred from " + why, nil
}

func ints(list string) []int {
	var out []int
	for s := range strings.SplitSeq(list, ",") {
		v, _ := strconv.Atoi(strings.TrimSpace(s))
		out = append(out, v)
	}
	return out
}

func prodInts(v []int) int {
	n := 1
	for _, x := range v {
		n *= x
	}
	return n
}

// meshSizes gives the mesh's axis sizes greater than 1, in order.
func meshSizes(m *sharding.Mesh) []int {
	var out []int
	for _, a := range m.Axes {
		if a.Size > 1 {
			out = append(out, a.Size)
		}
	}
	return out
}

// shardingAxes gives the axis sizes an HloSharding's tile assignment lays its devices
// over: a transposed iota's reshape dims, or a plain iota's tile dims (sizes 1 left out).
func shardingAxes(text string) ([]int, bool) {
	mm := tileRE.FindStringSubmatch(text)
	if mm == nil || mm[2] == "" {
		return nil, false
	}
	dims := ints(mm[1])
	if strings.Contains(mm[3], ",") {
		dims = ints(mm[3])
	}
	var out []int
	for _, d := range dims {
		if d > 1 {
			out = append(out, d)
		}
	}
	return out, true
}

// refines reports whether axes of sizes mesh (major to minor) split the devices at
// every place axes of sizes want do: each of want's suffix products is one of mesh's.
func refines(mesh, want []int) bool {
	have := map[int]bool{}
	p := 1
	for i := len(mesh) - 1; i >= 0; i-- {
		p *= mesh[i]
		have[p] = true
	}
	p = 1
	for i := len(want) - 1; i > 0; i-- {
		if p *= want[i]; !have[p] {
			return false
		}
	}
	return true
}

// shapeRatio is how many devices a synchronous all-gather or reduce-scatter's shapes
// imply: its dimension's size out over in (in over out for a reduce-scatter); 0 when
// they do not say.
func shapeRatio(c *Computation, in *Instr) int {
	base := in.Opcode
	start := false
	if b, phase := asyncBase(in.Opcode); phase == "start" {
		base, start = b, true
	}
	if (base != "all-gather" && base != "reduce-scatter") || len(in.Operands) == 0 {
		return 0
	}
	op := c.Instr(in.Operands[0])
	dims, err := Ints(in.Attrs["dimensions"])
	if op == nil || err != nil || len(dims) != 1 {
		return 0
	}
	// The first operand and its result: a -start prints (operands, results); a
	// gather or scatter of several operands prints a tuple of results.
	res := in.Shape
	if start && res.IsTuple() && len(res.Tuple) >= 2 {
		res = res.Tuple[1]
	}
	res, arg := firstArray(res), firstArray(op.Shape)
	d := dims[0]
	if res.IsTuple() || arg.IsTuple() || d < 0 || int(d) >= len(arg.Dims) || int(d) >= len(res.Dims) {
		return 0
	}
	small, big := arg.Dims[d], res.Dims[d]
	if base == "reduce-scatter" {
		small, big = big, small
	}
	if small <= 0 || big%small != 0 || big/small > 1<<30 {
		return 0
	}
	return int(big / small)
}

// firstArray is s, or the first array of a tuple s (depth first).
func firstArray(s Shape) Shape {
	for range 8 {
		if !s.IsTuple() || len(s.Tuple) == 0 {
			return s
		}
		s = s.Tuple[0]
	}
	return s
}

// crpPartitions is the partition count a cross-replica-and-partition gather or scatter
// shows: its shapes' ratio (the devices of one group) over the replicas a group lists;
// 0 when it is not one or does not tell.
func crpPartitions(c *Computation, in *Instr) int {
	kind, ok := collectiveOps[in.Opcode]
	if !ok || !crossReplicaAndPartition(in, kind) {
		return 0
	}
	k := shapeRatio(c, in)
	if k <= 1 {
		return 0
	}
	v := strings.TrimSpace(in.Attrs["replica_groups"])
	if !strings.HasPrefix(v, "{{") {
		return 0
	}
	end := strings.IndexByte(v, '}')
	listed := len(strings.Split(v[2:end], ","))
	if listed < 1 || k%listed != 0 {
		return 0
	}
	return k / listed
}

// partitionCount is the module's partition count: the header's num_partitions, else
// the most its cross-replica-and-partition gathers and scatters show, when it divides
// devices (1 otherwise).
func (m *Module) partitionCount(devices int) int {
	if m.CountsGiven {
		return m.NumPartitions
	}
	best := 1
	for _, c := range m.Computations {
		for _, in := range c.Instrs {
			if p := crpPartitions(c, in); p > best && devices%p == 0 {
				best = p
			}
		}
	}
	return best
}
