package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/schedule"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/transfer"
)

// TransferRequest moves tensors from a source placement to one or more target
// placements (replicas) on one fabric.
type TransferRequest struct {
	// CostModel is a GPU profile name ("h100") or object: nodes of gpus_per_node GPUs.
	CostModel json.RawMessage `json:"cost_model,omitempty" swaggertype:"object"`
	// FabricDevices is the number of devices on the fabric: global ids 0..N-1, nodes of
	// gpus_per_node consecutive ids.
	FabricDevices int                 `json:"fabric_devices" validate:"required,gte=1" example:"384"`
	Source        TransferPlacement   `json:"source" validate:"required"`
	Targets       []TransferPlacement `json:"targets" validate:"required,min=1,dive"`
	Tensors       []TransferTensor    `json:"tensors" validate:"required,min=1,dive"`
	// MemoryBudgetBytesPerDevice bounds what any device holds at any time (its tiles
	// plus two buckets of what it sends and receives); 0: none.
	MemoryBudgetBytesPerDevice int64 `json:"memory_budget_bytes_per_device,omitempty" validate:"gte=0"`
	// Strategy: auto (default: the fastest), direct, fanout, spread, chain, tree or mixed.
	Strategy string `json:"strategy,omitempty" validate:"omitempty,oneof=auto direct fanout spread chain tree mixed"`
	// Include: "tensors" (one entry per tensor), "transfers" (each group's moves),
	// "schedule" (every rank's ordered operations, API.md "Schedules"; the answer then
	// carries a plan_id).
	Include []string `json:"include,omitempty" validate:"dive,oneof=tensors transfers schedule"`
	// Fused are target tensors built from several source tensors concatenated along one
	// dim (qkv_proj from q_proj, k_proj, v_proj): each part, an entry of tensors named
	// exactly as in parts, goes to the devices whose tile of the fused tensor covers it.
	Fused []TransferFused `json:"fused,omitempty" validate:"dive"`
} // @name TransferRequest

// TransferFused is a fused target tensor: parts (names of tensors entries, as written
// there) concatenated along dim, held by every target under target (a sharding of the
// fused shape). The parts share their repeats; name takes the same {i} and {j}.
type TransferFused struct {
	Name   string          `json:"name" validate:"required" example:"layers.{i}.self_attn.qkv_proj.weight"`
	Dim    int             `json:"dim" validate:"gte=0" example:"0"`
	Parts  []string        `json:"parts" validate:"required,min=1"`
	Target json.RawMessage `json:"target" validate:"required" swaggertype:"object"`
} // @name TransferFused

// TransferPlacement is a mesh on the fabric: device_ids are global ids (row-major
// positions of the mesh), or first_device starts consecutive ids.
type TransferPlacement struct {
	Name        string          `json:"name,omitempty" example:"trainer"`
	Mesh        json.RawMessage `json:"mesh" validate:"required" swaggertype:"object"`
	DeviceIDs   []int           `json:"device_ids,omitempty"`
	FirstDevice *int            `json:"first_device,omitempty" validate:"omitempty,gte=0"`
} // @name TransferPlacement

// TransferTensor is one tensor, or repeat (times repeat_j) tensors of the same shape
// and shardings ("{i}" in name becomes 0..repeat-1, "{j}" 0..repeat_j-1).
type TransferTensor struct {
	Name         string          `json:"name" validate:"required" example:"layers.{i}.mlp.up"`
	Shape        []int64         `json:"shape,omitempty"`
	DType        string          `json:"dtype,omitempty" example:"bf16"`
	ElementBytes *int            `json:"element_bytes,omitempty" validate:"omitempty,gte=1,lte=16"`
	Tensor       string          `json:"tensor,omitempty"`
	TargetShape  []int64         `json:"target_shape,omitempty"`
	Source       json.RawMessage `json:"source" validate:"required" swaggertype:"object"`
	// Target is the target sharding; a part of a fused tensor leaves it out (its
	// target is the fused tensor's).
	Target json.RawMessage `json:"target,omitempty" swaggertype:"object"`
	// Repeat is how many tensors the entry stands for ({i} takes 0..repeat-1); at least 1.
	// TargetDType casts the tensor to a (quantized) dtype on the way: the target holds
	// it in this dtype, with Scales when given.
	TargetDType string `json:"target_dtype,omitempty" example:"f8e4m3fn"`
	// Scales are a quantized target's scale tensors.
	Scales *TransferScales `json:"scales,omitempty"`
	// Cast says where the cast happens: auto (default: before the send when the
	// sender's tile holds whole scale groups), before_send or after_receive.
	Cast   string `json:"cast,omitempty" validate:"omitempty,oneof=auto before_send after_receive" enums:"auto,before_send,after_receive"`
	Repeat *int   `json:"repeat,omitempty" validate:"omitempty,gte=1" example:"32"`
	// RepeatJ repeats the entry again inside each {i} ({j} takes 0..repeat_j-1): layers x
	// experts is repeat = layers, repeat_j = experts; at least 1.
	RepeatJ *int `json:"repeat_j,omitempty" validate:"omitempty,gte=1" example:"8"`
} // @name TransferTensor

// TransferScales are a quantized target's scales: one per block of block_size elements
// along the last dim ("block"), or one per row, over the whole last dim ("channel").
type TransferScales struct {
	Granularity string `json:"granularity" validate:"required,oneof=block channel" enums:"block,channel"`
	BlockSize   int    `json:"block_size,omitempty" validate:"omitempty,gte=1,lte=1048576" example:"128"`
	// DType is the scales' dtype (default f32).
	DType string `json:"dtype,omitempty" example:"f32"`
} // @name TransferScales

// transferProblem reads req into the planner's problem; every error names its field.
func (s *Server) transferProblem(req *TransferRequest) (*transfer.Problem, error) {
	model, err := cost.Resolve(req.CostModel, "cost_model")
	if err != nil {
		return nil, err
	}
	fab, err := transfer.FabricOf(model, "cost_model")
	if err != nil {
		return nil, err
	}
	if s.limits.MaxDevices > 0 && req.FabricDevices > s.limits.MaxDevices {
		return nil, limitExceeded("fabric_devices", "is %d; the limit is %d (SHARDPLAN_MAX_DEVICES)", req.FabricDevices, s.limits.MaxDevices)
	}
	p := &transfer.Problem{Fabric: fab, Devices: req.FabricDevices, MemoryBudget: req.MemoryBudgetBytesPerDevice, Strategy: req.Strategy}
	var fes fielderr.Errors
	if p.Source, err = s.placement(&req.Source, "source"); err != nil {
		return nil, err
	}
	for i := range req.Targets {
		t, err := s.placement(&req.Targets[i], fmt.Sprintf("targets[%d]", i))
		if err != nil {
			return nil, err
		}
		p.Targets = append(p.Targets, t)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(req.Tensors) > s.limits.MaxGraphTensors && s.limits.MaxGraphTensors > 0 {
		return nil, limitExceeded("tensors", "has %d entries; the limit is %d (SHARDPLAN_MAX_GRAPH_TENSORS): give repeated layers once with repeat", len(req.Tensors), s.limits.MaxGraphTensors)
	}
	// Sizes first, from the request alone: how many tensors the repeats stand for and
	// the bytes their names take in the answer, before anything is made of them.
	names, err := s.transferNames(req)
	if err != nil {
		return nil, err
	}
	partOf, err := fusedParts(req)
	if err != nil {
		return nil, err
	}
	for i := range req.Tensors {
		_, isPart := partOf[i]
		t, err := s.transferTensor(&req.Tensors[i], fmt.Sprintf("tensors[%d]", i), p, isPart)
		if err != nil {
			if es, ok := fielderr.As(err); ok {
				fes = append(fes, es...)
				continue
			}
			return nil, err
		}
		t.Names, t.Count = names[i], names[i].Count()
		p.Tensors = append(p.Tensors, t)
	}
	p.MaxMoves = s.limits.MaxTransferMoves
	if err := fes.Err(); err != nil {
		return p, err
	}
	return p, s.fuseTargets(req, p)
}

// fusedParts maps each tensors entry that is a part of a fused target to its fused
// entry; a part name no entry has, or a part listed twice, is a 400 naming it.
func fusedParts(req *TransferRequest) (map[int]int, error) {
	if len(req.Fused) == 0 {
		return nil, nil
	}
	byName := map[string]int{}
	for i := range req.Tensors {
		if _, dup := byName[req.Tensors[i].Name]; !dup {
			byName[req.Tensors[i].Name] = i
		}
	}
	partOf := map[int]int{}
	var fes fielderr.Errors
	for k := range req.Fused {
		for m, name := range req.Fused[k].Parts {
			field := fmt.Sprintf("fused[%d].parts[%d]", k, m)
			i, ok := byName[name]
			switch {
			case !ok:
				fes = append(fes, fielderr.New(field, "names no entry of tensors (%q); give a tensors entry's name exactly as written there, placeholders included", clip(name)))
			case partOf[i] != 0:
				fes = append(fes, fielderr.New(field, "tensors[%d] is already a part of fused[%d]: a source tensor goes into one fused target", i, partOf[i]-1))
			default:
				partOf[i] = k + 1
			}
		}
	}
	if err := fes.Err(); err != nil {
		return nil, err
	}
	return partOf, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// fuseTargets checks every fused entry against its parts (same rank, dims and dtype
// except on the fused dim, same repeats), reads its target sharding on the fused shape
// and places each part at its offset.
func (s *Server) fuseTargets(req *TransferRequest, p *transfer.Problem) error {
	var fes fielderr.Errors
	for k := range req.Fused {
		fj := &req.Fused[k]
		field := fmt.Sprintf("fused[%d]", k)
		idx := make([]int, len(fj.Parts))
		for m, name := range fj.Parts {
			for i := range req.Tensors {
				if req.Tensors[i].Name == name {
					idx[m] = i
					break
				}
			}
		}
		first := &p.Tensors[idx[0]]
		if fj.Dim >= len(first.Shape) {
			fes = append(fes, fielderr.New(field+".dim", "is %d but the parts have rank %d: give a dim in 0..%d", fj.Dim, len(first.Shape), len(first.Shape)-1))
			continue
		}
		shape := slices.Clone(first.Shape)
		shape[fj.Dim] = 0
		ok := true
		for m, i := range idx {
			t, pf := &p.Tensors[i], fmt.Sprintf("%s.parts[%d]", field, m)
			tj, fj0 := &req.Tensors[i], &req.Tensors[idx[0]]
			switch {
			case len(t.Shape) != len(first.Shape):
				fes = append(fes, fielderr.New(pf, "tensors[%d] has shape %v but %s has %v: parts have the same rank", i, t.Shape, fj.Parts[0], first.Shape))
				ok = false
				continue
			case t.ElemBits != first.ElemBits:
				fes = append(fes, fielderr.New(pf, "tensors[%d] has %d-bit elements but %s has %d: parts have the same dtype", i, t.ElemBits, fj.Parts[0], first.ElemBits))
				ok = false
				continue
			case t.Names.I != first.Names.I || t.Names.J != first.Names.J || (tj.Repeat == nil) != (fj0.Repeat == nil) || (tj.RepeatJ == nil) != (fj0.RepeatJ == nil):
				fes = append(fes, fielderr.New(pf, "tensors[%d] repeats %dx%d but %s %dx%d: parts have the same repeat and repeat_j", i, t.Names.I, t.Names.J, fj.Parts[0], first.Names.I, first.Names.J))
				ok = false
				continue
			}
			for d := range shape {
				if d != fj.Dim && t.Shape[d] != first.Shape[d] {
					fes = append(fes, fielderr.New(pf, "tensors[%d] has shape %v but %s has %v: parts agree on every dim but dim %d", i, t.Shape, fj.Parts[0], first.Shape, fj.Dim))
					ok = false
					break
				}
			}
			shape[fj.Dim] += t.Shape[fj.Dim]
		}
		if !ok {
			continue
		}
		ri, rj := 0, 0
		if r := req.Tensors[idx[0]].Repeat; r != nil {
			ri = *r
		}
		if r := req.Tensors[idx[0]].RepeatJ; r != nil {
			rj = *r
		}
		names, err := transfer.NewNames(fj.Name, ri, rj, field+".name")
		if err != nil {
			es, _ := fielderr.As(err)
			fes = append(fes, es...)
			continue
		}
		if err := checkShape(shape, field+".parts", s.limits); err != nil {
			return err
		}
		target, err := sharding.Parse(fj.Target, p.Targets[0].Mesh, shape, field+".target")
		if err != nil {
			return err
		}
		if len(target.Unreduced) > 0 {
			return sharding.Fieldf(field+".target", "has unreduced axes: a transfer moves reduced values")
		}
		off := int64(0)
		for _, i := range idx {
			t := &p.Tensors[i]
			t.Target, t.Fused = target, &transfer.FusedPart{Shape: shape, Dim: fj.Dim, Offset: off, Entry: k, Name: fj.Name, Names: names}
			off += t.Shape[fj.Dim]
		}
	}
	return fes.Err()
}

// transferNames reads every entry's name and repeats, checks how many tensors they
// stand for against SHARDPLAN_MAX_TRANSFER_TENSORS and the answer their names make
// against SHARDPLAN_MAX_ANSWER_BYTES, all before a name is generated.
func (s *Server) transferNames(req *TransferRequest) ([]transfer.Names, error) {
	most := int64(s.limits.MaxTransferTensors)
	if most <= 0 {
		most = int64(DefaultLimits().MaxTransferTensors)
	}
	out := make([]transfer.Names, len(req.Tensors))
	var fes fielderr.Errors
	count, nameBytes := int64(0), int64(0)
	largest, largestBytes := 0, int64(-1)
	for i := range req.Tensors {
		tj := &req.Tensors[i]
		field := fmt.Sprintf("tensors[%d]", i)
		ri, rj := 0, 0
		for _, r := range []struct {
			v     *int
			name  string
			value *int
		}{{tj.Repeat, ".repeat", &ri}, {tj.RepeatJ, ".repeat_j", &rj}} {
			if r.v == nil {
				continue
			}
			if int64(*r.v) > most {
				return nil, limitExceeded(field+r.name, "is %d; a request stands for at most %d tensors (SHARDPLAN_MAX_TRANSFER_TENSORS): split the model over several requests", *r.v, most)
			}
			*r.value = *r.v
		}
		n, err := transfer.NewNames(tj.Name, ri, rj, field+".name")
		if err != nil {
			es, _ := fielderr.As(err)
			fes = append(fes, es...)
			continue
		}
		if count += int64(n.Count()); count > most {
			return nil, limitExceeded(field, "takes the request past %d tensors, repeats counted (SHARDPLAN_MAX_TRANSFER_TENSORS): split the model over several requests", most)
		}
		b := n.JSONBytes() + int64(n.Count())
		if nameBytes += b; b > largestBytes {
			largest, largestBytes = i, b
		}
		out[i] = n
	}
	if err := fes.Err(); err != nil {
		return nil, err
	}
	// The answer lists every name in its group, and once more with "tensors" included,
	// each in an entry of its figures: a lower bound of its size, known now. Past the
	// limit it is refused before planning; the rest of the answer (a group's figures per
	// entry) is bounded by the entries and checked when the answer is written.
	size := nameBytes
	withTensors := size
	if slices.Contains(req.Include, "tensors") {
		withTensors += nameBytes + count*transferTensorEntryBytes
	}
	if limit := s.limits.MaxAnswerBytes; limit > 0 && withTensors > limit {
		field, fix := fmt.Sprintf("tensors[%d]", largest), "split the model over several requests"
		if size <= limit {
			field, fix = "include", `leave "tensors" out of include`
		}
		p := Invalid(slugResponseTooLarge, "Response too large", sharding.Fieldf(field,
			"the answer would take more than %s listing %d tensor names (tensors[%d] the most, %s), over the answer limit of %s (SHARDPLAN_MAX_ANSWER_BYTES); %s",
			mib(withTensors), count, largest, mib(largestBytes), mib(limit), fix))
		p.Status = http.StatusUnprocessableEntity
		return nil, p
	}
	return out, nil
}

// transferTensorEntryBytes is the least an entry of the answer's "tensors" takes beside
// its name: {"name":,"group":0,"bytes":0,"time_us":0,"time_lower_bound_us":0},
const transferTensorEntryBytes = 66

// transferFieldProblem classifies a transfer request's field errors: a mesh is
// invalid-mesh, a tensor's source or target invalid-sharding, the rest (placements'
// ids, shapes, the model, limits) invalid-request; several kinds are invalid-request.
func transferFieldProblem(err error) error {
	fes, ok := fielderr.As(err)
	if !ok {
		return err
	}
	slug, title := "", ""
	for _, fe := range fes {
		k, t := slugInvalidRequest, "Invalid transfer request"
		switch {
		case strings.Contains(fe.Field, ".mesh"):
			k, t = slugInvalidMesh, "Invalid mesh"
		case strings.HasPrefix(fe.Field, "tensors[") && (strings.Contains(fe.Field, "].source") || strings.Contains(fe.Field, "].target") && !strings.Contains(fe.Field, "target_shape")):
			k, t = slugInvalidSharding, "Invalid sharding"
		}
		if slug != "" && slug != k {
			k, t = slugInvalidRequest, "Invalid transfer request"
		}
		slug, title = k, t
	}
	return Invalid(slug, title, fes...)
}

// placement reads one placement: its mesh (any form /v1/reshard takes) and global ids.
func (s *Server) placement(pj *TransferPlacement, field string) (transfer.Placement, error) {
	out := transfer.Placement{Name: pj.Name, Field: field}
	raw := pj.Mesh
	var ids []int
	if t := strings.TrimSpace(string(raw)); strings.HasPrefix(t, "{") {
		var o MeshObject
		if err := decodeBytes(raw, &o); err != nil {
			return out, prefixProblem(err, field+".mesh")
		}
		ids, o.DeviceIDs = o.DeviceIDs, nil
		raw, _ = json.Marshal(o)
	}
	m, err := parseMesh(raw, field+".mesh", s.limits)
	if err != nil {
		return out, err
	}
	if m.DeviceIDs != nil {
		ids = m.DeviceIDs
	}
	if m, err = sharding.NewMesh(m.Name, m.Axes, nil); err != nil {
		return out, err
	}
	out.Mesh = m
	n := m.NumDevices()
	switch {
	case pj.DeviceIDs != nil && (ids != nil || pj.FirstDevice != nil):
		return out, sharding.Fieldf(field+".device_ids", "give the global ids once: device_ids, first_device or the mesh's device_ids")
	case pj.DeviceIDs != nil:
		ids = pj.DeviceIDs
	case pj.FirstDevice != nil && ids != nil:
		return out, sharding.Fieldf(field+".first_device", "give the global ids once: first_device or the mesh's device_ids")
	case pj.FirstDevice != nil:
		ids = make([]int, n)
		for i := range ids {
			ids[i] = *pj.FirstDevice + i
		}
	case ids == nil:
		return out, sharding.Fieldf(field+".device_ids", "is required: give the global id of each mesh position (row-major), or first_device for consecutive ids")
	}
	out.Devices = ids
	return out, nil
}

// transferTensor reads one tensor entry.
func (s *Server) transferTensor(tj *TransferTensor, field string, p *transfer.Problem, isPart bool) (transfer.Tensor, error) {
	t := transfer.Tensor{Name: tj.Name, Field: field, Count: 1}
	shape, dtype := tj.Shape, tj.DType
	if err := tensorType(tj.Tensor, &shape, &dtype, tj.ElementBytes); err != nil {
		return t, prefixFields(err, field)
	}
	if len(shape) == 0 {
		return t, sharding.Fieldf(field+".shape", "is required (or give tensor)")
	}
	if err := checkShape(shape, field+".shape", s.limits); err != nil {
		return t, err
	}
	bits, err := elementBits(dtype, tj.ElementBytes, field+".dtype")
	if err != nil {
		return t, err
	}
	if tj.TargetShape != nil && !equalShape(tj.TargetShape, shape) {
		return t, sharding.Fieldf(field+".target_shape", "is %v but the source shape is %v: a transfer moves a tensor unchanged between placements; give the same shape (reshape before or after)", tj.TargetShape, shape)
	}
	t.Shape, t.ElemBits = shape, bits
	if t.Source, err = sharding.Parse(tj.Source, p.Source.Mesh, shape, field+".source"); err != nil {
		return t, err
	}
	switch {
	case isPart && len(tj.Target) > 0:
		return t, sharding.Fieldf(field+".target", "is given but this tensor is a part of a fused target: its target is the fused entry's; leave it out")
	case isPart && (tj.TargetDType != "" || tj.TargetShape != nil):
		return t, sharding.Fieldf(field+".target_dtype", "a part of a fused target takes the fused tensor's dtype and shape; leave target_dtype and target_shape out")
	case isPart:
		t.Target = t.Source // replaced by the fused target's sharding
	case len(tj.Target) == 0:
		return t, sharding.Fieldf(field+".target", "is required: the sharding the targets hold (unless the tensor is a part of a fused entry)")
	default:
		if t.Target, err = sharding.Parse(tj.Target, p.Targets[0].Mesh, shape, field+".target"); err != nil {
			return t, err
		}
	}
	for k, sh := range []sharding.Sharding{t.Source, t.Target} {
		if len(sh.Unreduced) > 0 {
			return t, sharding.Fieldf(field+[]string{".source", ".target"}[k], "has unreduced axes: a transfer moves reduced values; reduce on the source first")
		}
	}
	if err := castOf(tj, &t, p, field); err != nil {
		return t, err
	}
	return t, nil
}

// castOf reads a quantized target: its dtype, scales and where the cast happens. The
// sender can cast when its tile holds whole scale groups (per block: its tile along the
// last dim is a multiple of block_size or the whole dim; per channel: the source does
// not cut the last dim); else the receiver casts (auto), and before_send is a 400.
func castOf(tj *TransferTensor, t *transfer.Tensor, p *transfer.Problem, field string) error {
	if tj.TargetDType == "" {
		switch {
		case tj.Scales != nil:
			return sharding.Fieldf(field+".scales", "scales come with target_dtype (the quantized dtype the target holds)")
		case tj.Cast != "" && tj.Cast != "auto":
			return sharding.Fieldf(field+".cast", "is %q without target_dtype: there is no cast", tj.Cast)
		}
		return nil
	}
	bits, ok := sharding.DTypeBits(tj.TargetDType)
	if !ok {
		return sharding.Fieldf(field+".target_dtype", "unknown dtype %q; known dtypes: %s", tj.TargetDType, sharding.KnownDTypes())
	}
	t.TargetBits = bits
	last := len(t.Shape) - 1
	whole := true // the sender's tile holds whole scale groups
	src := sharding.NewLayout(p.Source.Mesh, t.Shape, t.Source)
	if sc := tj.Scales; sc != nil {
		sbits := 32
		if sc.DType != "" {
			if sbits, ok = sharding.DTypeBits(sc.DType); !ok {
				return sharding.Fieldf(field+".scales.dtype", "unknown dtype %q; known dtypes: %s", sc.DType, sharding.KnownDTypes())
			}
		}
		switch sc.Granularity {
		case "block":
			if sc.BlockSize == 0 {
				return sharding.Fieldf(field+".scales.block_size", "is required with granularity block: the elements of the last dim each scale covers (e.g. 128)")
			}
			t.ScaleBits = float64(sbits) / float64(sc.BlockSize)
			whole = src.Counts[last] == 1 || src.Tile[last]%int64(sc.BlockSize) == 0
		case "channel":
			if sc.BlockSize != 0 {
				return sharding.Fieldf(field+".scales.block_size", "is for granularity block; a channel's scale covers the whole last dim")
			}
			t.ScaleBits = float64(sbits) / float64(t.Shape[last])
			whole = src.Counts[last] == 1
		}
	}
	switch tj.Cast {
	case "after_receive":
		t.CastAfter = true
	case "before_send":
		if !whole {
			return sharding.Fieldf(field+".cast", "before_send needs each sender to hold whole scale groups, but the source cuts the last dim into tiles of %d elements; give after_receive or auto", src.Tile[last])
		}
	default:
		t.CastAfter = !whole
	}
	return nil
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// prefixFields puts field in front of err's field names (tensorType names "tensor").
func prefixFields(err error, field string) error {
	es, ok := fielderr.As(err)
	if !ok {
		return err
	}
	out := make(fielderr.Errors, len(es))
	for i, e := range es {
		out[i] = fielderr.New(field+"."+e.Field, "%s", e.Message)
	}
	return out
}

// TransferResponse is a planned transfer.
type TransferResponse struct {
	CostModel     string              `json:"cost_model"`
	FabricDevices int                 `json:"fabric_devices"`
	Summary       TransferSummary     `json:"summary"`
	Phases        []TransferPhase     `json:"phases"`
	Groups        []TransferGroup     `json:"groups"`
	Tensors       []TransferTensorOut `json:"tensors,omitempty"`
	// Fused lists the request's fused targets with their parts' groups and offsets.
	Fused []TransferFusedOut `json:"fused,omitempty"`
	// PlanID (include "schedule") names the answer in the plan cache: GET
	// /v1/plans/{plan_id} returns it, /v1/plans/{plan_id}/schedule?rank=N one rank's
	// schedule.
	PlanID string `json:"plan_id,omitempty"`
	// Schedule (include "schedule") is every rank's ordered operations.
	Schedule *ScheduleJSON `json:"schedule,omitempty"`
} // @name TransferResponse

// TransferSummary is the plan in total.
type TransferSummary struct {
	Strategy         string  `json:"strategy"`
	Why              string  `json:"why"`
	TimeUS           float64 `json:"time_us"`
	TimeLowerBoundUS float64 `json:"time_lower_bound_us"`
	TimeEfficiency   float64 `json:"time_efficiency"`
	// Optimality is "proven" when the plan meets the bound, else "best_found".
	Optimality      string              `json:"optimality"`
	OptimalityGapUS float64             `json:"optimality_gap_us"`
	Bound           TransferBound       `json:"bound"`
	Buckets         int                 `json:"buckets"`
	BucketBytes     int64               `json:"bucket_bytes"`
	NetworkBytes    int64               `json:"network_bytes"`
	BytesByLink     map[string]int64    `json:"bytes_by_link"`
	PeakBytes       int64               `json:"peak_bytes_per_device"`
	PeakDevice      int                 `json:"peak_device"`
	ResidentBytes   int64               `json:"resident_bytes_per_device"`
	MemoryBudget    int64               `json:"memory_budget_bytes_per_device,omitempty"`
	Tensors         int                 `json:"tensors"`
	TensorBytes     int64               `json:"tensor_bytes"`
	Groups          int                 `json:"groups"`
	Moves           int                 `json:"moves"`
	ReplicaOrder    []int               `json:"replica_order,omitempty"`
	Candidates      []TransferCandidate `json:"candidates"`
	// Excluded are the strategies not among the candidates, each with its reason.
	Excluded []TransferExcluded `json:"excluded,omitempty"`
} // @name TransferSummary

// TransferBound is the fabric's lower bound and its terms.
type TransferBound struct {
	Binding         string  `json:"binding"`
	LatencyUS       float64 `json:"latency_us"`
	BandwidthUS     float64 `json:"bandwidth_us"`
	NodeIngressUS   float64 `json:"node_ingress_us"`
	NodeEgressUS    float64 `json:"node_egress_us"`
	DeviceIngressUS float64 `json:"device_ingress_us"`
	DeviceEgressUS  float64 `json:"device_egress_us"`
	NetworkBytes    int64   `json:"network_bytes"`
} // @name TransferBound

// TransferCandidate is one strategy priced over the whole request.
type TransferCandidate struct {
	Name   string  `json:"name"`
	TimeUS float64 `json:"time_us"`
	// FastestUS is the time at its fastest bucket count; time_us takes the most
	// buckets within 1% of it (less memory). Strategies are compared by it.
	FastestUS    float64 `json:"fastest_us"`
	NetworkBytes int64   `json:"network_bytes"`
	Buckets      int     `json:"buckets"`
	// Messages are the sends the plan makes: its moves over every tensor times its
	// buckets. The chosen plan has the fewest within 1% of the fastest candidate.
	Messages int64 `json:"messages"`
	Chosen   bool  `json:"chosen"`
} // @name TransferCandidate

// TransferExcluded is a strategy left out of the candidates, with why: it cannot run on
// the request (chain and tree need two or more replicas), was not priced (a limit), or
// needs more than the memory budget.
type TransferExcluded struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
} // @name TransferExcluded

// TransferPhase is one pipeline stage of the plan over every tensor.
type TransferPhase struct {
	Phase              int      `json:"phase"`
	Ops                []string `json:"ops"`
	Link               string   `json:"link"`
	NetworkBytes       int64    `json:"network_bytes"`
	NVLinkBytes        int64    `json:"nvlink_bytes"`
	BandwidthUS        float64  `json:"bandwidth_us"`
	LatencyUSPerBucket float64  `json:"latency_us_per_bucket"`
	MaxPeers           int      `json:"max_peers"`
	Binding            string   `json:"binding"`
} // @name TransferPhase

// TransferGroup is the tensors of one shape, dtype and sharding pair.
type TransferGroup struct {
	Tensors     []string `json:"tensors"`
	Count       int      `json:"count"`
	Shape       []int64  `json:"shape"`
	ElementBits int      `json:"element_bits"`
	Bytes       int64    `json:"bytes"`
	// TargetDType, Cast and ScaleBytes describe a quantized target: the dtype the
	// target holds, where the cast happens (before_send: moves carry the target's bytes
	// and scales; after_receive: the source's, staged at its width on the receiver) and
	// one tensor's scale bytes.
	TargetDType         string            `json:"target_dtype,omitempty"`
	Cast                string            `json:"cast,omitempty"`
	TargetBytes         int64             `json:"target_bytes,omitempty"`
	ScaleBytes          int64             `json:"scale_bytes,omitempty"`
	MovedBitsPerElement float64           `json:"moved_bits_per_element,omitempty"`
	Source              string            `json:"source"`
	Target              string            `json:"target"`
	Strategy            string            `json:"strategy"`
	TimeUS              float64           `json:"time_us"`
	TimeLowerBoundUS    float64           `json:"time_lower_bound_us"`
	Cells               int               `json:"cells"`
	Moves               int               `json:"moves"`
	Transfers           []TransferMove    `json:"transfers,omitempty"`
	TransferRuns        []TransferMoveRun `json:"transfer_runs,omitempty"`
	// Fused places the group's tensors inside a fused target tensor: target is the
	// fused tensor's sharding, and the moves' ranges are the part's own indices (the
	// receiver writes them at offset along dim).
	Fused *TransferGroupFused `json:"fused,omitempty"`
} // @name TransferGroup

// TransferGroupFused is where a group's tensors sit in their fused target tensor.
type TransferGroupFused struct {
	Shape  []int64 `json:"shape"`
	Dim    int     `json:"dim"`
	Offset int64   `json:"offset"`
} // @name TransferGroupFused

// TransferFusedOut is one fused entry of the request: count fused tensors, named by
// name as its parts are by theirs, each its parts concatenated along dim.
type TransferFusedOut struct {
	Name        string                 `json:"name"`
	Count       int                    `json:"count"`
	Shape       []int64                `json:"shape"`
	Dim         int                    `json:"dim"`
	ElementBits int                    `json:"element_bits"`
	Bytes       int64                  `json:"bytes"`
	Target      string                 `json:"target"`
	Parts       []TransferFusedPartOut `json:"parts"`
} // @name TransferFusedOut

// TransferFusedPartOut is one part of a fused tensor: the tensors entry, its group and
// its range [offset, offset+size) along the fused dim.
type TransferFusedPartOut struct {
	Name   string `json:"name"`
	Group  int    `json:"group"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
} // @name TransferFusedPartOut

// TransferMove is one move of one tensor of a group: global ids, global ranges.
type TransferMove struct {
	Phase  int        `json:"phase"`
	From   int        `json:"from"`
	To     int        `json:"to"`
	Ranges [][2]int64 `json:"ranges"`
	Bytes  int64      `json:"bytes"`
} // @name TransferMove

// TransferMoveRun is count moves: first, then first plus i times step in every number.
type TransferMoveRun struct {
	First TransferMove `json:"first"`
	Step  TransferMove `json:"step"`
	Count int          `json:"count"`
} // @name TransferMoveRun

// TransferTensorOut is one tensor moved alone.
type TransferTensorOut struct {
	Name             string  `json:"name"`
	Group            int     `json:"group"`
	Bytes            int64   `json:"bytes"`
	TimeUS           float64 `json:"time_us"`
	TimeLowerBoundUS float64 `json:"time_lower_bound_us"`
} // @name TransferTensorOut

// transferRequest godoc
//
//	@Summary		Plan moving tensors between placements (trainer to inference replicas)
//	@Description	Plans the weight transfer from a source placement to one or more target placements (replicas) on one GPU fabric: direct pulls, a fetch per node with an NVLink fan-out, chains and trees across replicas, or each tensor group its own, priced on the fabric's NVLink ports and NICs with buckets that pipeline, beside the fabric's lower bound. With `Accept: text/plain` the answer is a report; with `Accept: image/svg+xml` a drawing of the nodes and the network flows.
//	@Tags			transfer
//	@Accept			json
//	@Produce		json
//	@Produce		text/plain
//	@Produce		image/svg+xml
//	@Produce		application/problem+json
//	@Param			request	body		TransferRequest	true	"fabric, placements and tensors"
//	@Success		200		{object}	TransferResponse
//	@Failure		400		{object}	Problem	"invalid JSON, placement, tensor, sharding or cost model; a limit exceeded"
//	@Failure		422		{object}	Problem	"no plan within memory_budget_bytes_per_device, or the transfers asked for exceed SHARDPLAN_MAX_RESPONSE_BYTES"
//	@Failure		503		{object}	Problem	"overloaded or timed out"
//	@Router			/v1/transfer [post]
func (s *Server) transferRequest(w http.ResponseWriter, r *http.Request) error {
	var req TransferRequest
	if err := s.decodeJSON(r, &req); err != nil {
		return err
	}
	p, err := s.transferProblem(&req)
	if err != nil {
		return transferFieldProblem(err)
	}
	resp, res, err := s.planTransfer(r.Context(), &req, p)
	if err != nil {
		return err
	}
	if wantsSVG(r) {
		body, err := transferSVG(p, res)
		if err != nil {
			return err
		}
		writeSVG(w, body)
		return nil
	}
	if wantsText(r) {
		writeBody(w, http.StatusOK, textMediaType+"; charset=utf-8", []byte(TransferText(resp)))
		return nil
	}
	if resp.Schedule != nil {
		return s.keepTransfer(w, r, resp)
	}
	return writeJSON(w, http.StatusOK, resp)
}

// planTransfer plans p and writes the JSON answer (the plan beside it, for drawings).
func (s *Server) planTransfer(ctx context.Context, req *TransferRequest, p *transfer.Problem) (*TransferResponse, *transfer.Result, error) {
	res, err := transfer.Plan(ctx, p)
	if err != nil {
		var be *transfer.BudgetError
		if errors.As(err, &be) {
			pr := Invalid(slugBudgetExceeded, "No plan within the memory budget", sharding.Fieldf("memory_budget_bytes_per_device",
				"%s; the smallest budget that admits a plan is %d", be.Error(), be.MinBudget))
			pr.Status = http.StatusUnprocessableEntity
			pr.MinBudget = be.MinBudget
			return nil, nil, pr
		}
		var le *transfer.LimitError
		if errors.As(err, &le) {
			return nil, nil, limitExceeded(le.Field, "%s", le.Msg)
		}
		return nil, nil, err
	}
	include := map[string]bool{}
	for _, v := range req.Include {
		include[v] = true
	}
	out := &TransferResponse{CostModel: p.Fabric.Name, FabricDevices: p.Devices}
	sm := &out.Summary
	sm.Strategy, sm.Why, sm.TimeUS = res.Strategy, res.Why, round2(res.TimeUS)
	sm.TimeLowerBoundUS = round2(res.Bound.TimeUS)
	sm.TimeEfficiency = 1
	if res.TimeUS > 0 {
		sm.TimeEfficiency = math.Round(res.Bound.TimeUS/res.TimeUS*1e4) / 1e4
	}
	sm.Optimality = "best_found"
	if res.TimeUS <= res.Bound.TimeUS*(1+1e-9) {
		sm.Optimality = "proven"
	}
	sm.OptimalityGapUS = round2(max(0, res.TimeUS-res.Bound.TimeUS))
	b := res.Bound
	sm.Bound = TransferBound{Binding: b.Binding, LatencyUS: round2(b.LatencyUS), BandwidthUS: round2(b.BandwidthUS), NodeIngressUS: round2(b.NodeIngressUS),
		NodeEgressUS: round2(b.NodeEgressUS), DeviceIngressUS: round2(b.DeviceIngressUS), DeviceEgressUS: round2(b.DeviceEgressUS), NetworkBytes: int64(b.NetworkBytes + 0.5)}
	sm.Buckets, sm.BucketBytes = res.Buckets, res.BucketBytes
	sm.NetworkBytes = res.NetworkBytes
	sm.BytesByLink = map[string]int64{"ib": res.NetworkBytes, "nvlink": res.NVLinkBytes}
	sm.PeakBytes, sm.PeakDevice, sm.ResidentBytes = res.PeakBytesPerDevice, res.PeakDevice, res.ResidentBytes
	sm.MemoryBudget = p.MemoryBudget
	sm.Tensors, sm.TensorBytes, sm.Groups, sm.Moves = res.TensorCount, res.TensorBytes, len(res.Classes), res.MoveCount
	if res.Strategy == "chain" || res.Strategy == "tree" || res.Strategy == "mixed" {
		sm.ReplicaOrder = res.Order
	}
	for _, c := range res.Candidates {
		sm.Candidates = append(sm.Candidates, TransferCandidate{Name: c.Name, TimeUS: round2(c.TimeUS), FastestUS: round2(c.FastestUS), NetworkBytes: c.NetworkBytes, Buckets: c.Buckets, Messages: c.Messages, Chosen: c.Chosen})
	}
	for _, e := range res.Excluded {
		sm.Excluded = append(sm.Excluded, TransferExcluded(e))
	}
	for j, ph := range res.Phases {
		out.Phases = append(out.Phases, TransferPhase{Phase: j, Ops: ph.Ops, Link: ph.Link, NetworkBytes: ph.NetworkBytes, NVLinkBytes: ph.NVLinkBytes,
			BandwidthUS: round2(ph.BandwidthUS), LatencyUSPerBucket: round2(ph.LatencyUS), MaxPeers: ph.MaxPeers, Binding: ph.Binding})
	}
	budget := s.limits.MaxResponseBytes
	for gi, c := range res.Classes {
		t0 := &p.Tensors[c.Tensors[0]]
		g := TransferGroup{Count: c.Count, Shape: t0.Shape, ElementBits: t0.ElemBits, Bytes: int64(float64(transferElems(t0.Shape))*float64(t0.ElemBits)/8 + 0.5),
			Source: t0.Source.Text(p.Source.Mesh.Name), Target: t0.Target.Text(p.Targets[0].Mesh.Name), Strategy: c.Strategy,
			TimeUS: round2(c.TimeUS), TimeLowerBoundUS: round2(c.Bound.TimeUS), Cells: c.Cells, Moves: len(c.Moves)}
		if t0.TargetBits > 0 {
			tj := &req.Tensors[tensorIndex(t0.Field)]
			g.TargetDType, g.Cast = tj.TargetDType, "before_send"
			if t0.CastAfter {
				g.Cast = "after_receive"
			}
			elems := float64(transferElems(t0.Shape))
			g.TargetBytes = int64(math.Ceil(elems * c.TargetBits / 8))
			g.ScaleBytes = int64(math.Ceil(elems * t0.ScaleBits / 8))
			g.MovedBitsPerElement = c.MoveBits
		}
		if f := t0.Fused; f != nil {
			g.Fused = &TransferGroupFused{Shape: f.Shape, Dim: f.Dim, Offset: f.Offset}
		}
		g.Tensors = make([]string, 0, c.Count)
		for _, ti := range c.Tensors {
			t := &p.Tensors[ti]
			for k := range t.Count {
				if k&1023 == 1023 && ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				n := t.NameAt(k)
				g.Tensors = append(g.Tensors, n)
				if include["tensors"] {
					out.Tensors = append(out.Tensors, TransferTensorOut{Name: n, Group: gi, Bytes: g.Bytes, TimeUS: round2(c.TimeUS), TimeLowerBoundUS: round2(c.Bound.TimeUS)})
				}
			}
		}
		if include["transfers"] {
			runs := moveRuns(c.Moves)
			list := len(c.Moves) * (64 + 24*len(t0.Shape))
			rl := len(runs) * 2 * (64 + 24*len(t0.Shape))
			if budget > 0 {
				if budget -= int64(min(list, rl)); budget < 0 {
					pr := NewProblem(http.StatusUnprocessableEntity, slugResponseTooLarge, "Response too large",
						"groups[%d].transfers would take the answer over %d bytes (SHARDPLAN_MAX_RESPONSE_BYTES); leave \"transfers\" out of include, or plan fewer tensors per request", gi, s.limits.MaxResponseBytes)
					return nil, nil, pr
				}
			}
			if rl < list {
				g.TransferRuns = runs
			} else {
				for _, m := range c.Moves {
					g.Transfers = append(g.Transfers, TransferMove(m))
				}
			}
		}
		out.Groups = append(out.Groups, g)
	}
	out.Fused = fusedOut(req, p, res)
	if include["schedule"] {
		sc, err := schedule.Transfer(ctx, p, res)
		if err != nil {
			return nil, nil, err
		}
		lb := &listBudget{} // no limit when SHARDPLAN_MAX_RESPONSE_BYTES is off
		if s.limits.MaxResponseBytes > 0 {
			lb.limit = max(1, budget) // what the transfers left
		}
		if out.Schedule, err = renderSchedule(sc, lb, "include", 0); err != nil {
			return nil, nil, err
		}
		out.PlanID = transferKey(req)
	}
	return out, res, nil
}

func transferElems(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// tensorIndex reads k off a tensor's field "tensors[k]".
func tensorIndex(field string) int {
	k, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(field, "tensors["), "]"))
	return k
}

// moveRuns compresses moves (in their order) into runs of a constant step.
func moveRuns(ms []transfer.Move) []TransferMoveRun {
	var out []TransferMoveRun
	diff := func(a, b transfer.Move) TransferMove {
		d := TransferMove{Phase: b.Phase - a.Phase, From: b.From - a.From, To: b.To - a.To, Bytes: b.Bytes - a.Bytes, Ranges: make([][2]int64, len(a.Ranges))}
		for i := range a.Ranges {
			d.Ranges[i] = [2]int64{b.Ranges[i][0] - a.Ranges[i][0], b.Ranges[i][1] - a.Ranges[i][1]}
		}
		return d
	}
	same := func(a, b TransferMove) bool {
		if a.Phase != b.Phase || a.From != b.From || a.To != b.To || a.Bytes != b.Bytes {
			return false
		}
		for i := range a.Ranges {
			if a.Ranges[i] != b.Ranges[i] {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(ms); {
		r := TransferMoveRun{First: TransferMove(ms[i]), Count: 1}
		if i+1 < len(ms) {
			r.Step = diff(ms[i], ms[i+1])
			j := i + 1
			for j < len(ms) && same(diff(ms[j-1], ms[j]), r.Step) {
				j++
			}
			r.Count = j - i
		}
		if r.Count == 1 {
			r.Step = TransferMove{Ranges: make([][2]int64, len(ms[i].Ranges))}
		}
		out = append(out, r)
		i += r.Count
	}
	return out
}

// round2 rounds a time to 0.01 µs for the answer.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// fusedOut reports the request's fused entries: shape, target and each part's group and
// offset.
func fusedOut(req *TransferRequest, p *transfer.Problem, res *transfer.Result) []TransferFusedOut {
	if len(req.Fused) == 0 {
		return nil
	}
	groupOf := map[int]int{}
	for gi, c := range res.Classes {
		for _, ti := range c.Tensors {
			groupOf[ti] = gi
		}
	}
	byField := map[string]int{}
	for ti := range p.Tensors {
		byField[p.Tensors[ti].Field] = ti
	}
	var out []TransferFusedOut
	for k := range req.Fused {
		fj := &req.Fused[k]
		var f TransferFusedOut
		for m, name := range fj.Parts {
			ti := -1
			for i := range req.Tensors {
				if req.Tensors[i].Name == name {
					ti = byField[fmt.Sprintf("tensors[%d]", i)]
					break
				}
			}
			t := &p.Tensors[ti]
			if m == 0 {
				f = TransferFusedOut{Name: fj.Name, Count: t.Count, Shape: t.Fused.Shape, Dim: t.Fused.Dim, ElementBits: t.ElemBits,
					Bytes: int64(float64(transferElems(t.Fused.Shape))*float64(t.ElemBits)/8 + 0.5), Target: t.Target.Text(p.Targets[0].Mesh.Name)}
			}
			f.Parts = append(f.Parts, TransferFusedPartOut{Name: name, Group: groupOf[ti], Offset: t.Fused.Offset, Size: t.Shape[t.Fused.Dim]})
		}
		out = append(out, f)
	}
	return out
}
