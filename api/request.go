package api

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"strconv"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The pieces every endpoint's request shares: a mesh (object or "x=2,y=4" string), a
// shape, an element type (dtype or element_bytes) and shardings. Parse them with
// parseMesh, checkShape, elementBits and sharding.Parse; each error names its wire field.

// MeshObject is the object form of a mesh (documentation of the wire shape; the field
// also accepts the "x=2,y=4" string).
type MeshObject struct {
	// Name binds Shardy text shardings (sharding<@name, ...>); default "mesh".
	Name string `json:"name,omitempty" example:"mesh"`
	// Axes are major to minor.
	Axes []MeshAxis `json:"axes" validate:"required"`
	// DeviceIDs is the id of the device at each row-major position; a permutation of
	// 0..N-1, default the identity.
	DeviceIDs []int `json:"device_ids,omitempty"`
} // @name MeshObject

// MeshAxis is one named mesh axis.
type MeshAxis struct {
	Name string `json:"name" example:"x"`
	Size int    `json:"size" example:"2"`
} // @name MeshAxis

// parseMesh reads a mesh from raw JSON (the object form or the "x=2,y=4" string),
// validates it and enforces the device and axis-count limits. field is its wire path.
func parseMesh(raw json.RawMessage, field string, lim Limits) (*sharding.Mesh, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, sharding.Fieldf(field, `is required: give {"axes": [{"name": "x", "size": 2}, ...]} or "x=2,y=4"`)
	}
	var m *sharding.Mesh
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, sharding.Fieldf(field, "is not a valid JSON string")
		}
		// Count axes before parsing so a huge string cannot cost much (a printed form's
		// commas also separate device ids: its axes are counted once it is read, in
		// time linear in its length).
		if n := bytes.Count(raw, []byte(",")) + 1; sharding.MeshForm(s) == "" && lim.MaxMeshAxes > 0 && n > lim.MaxMeshAxes {
			return nil, limitExceeded(field, "mesh has %d axes; the limit is %d (SHARDPLAN_MAX_MESH_AXES)", n, lim.MaxMeshAxes)
		}
		parsed, err := sharding.ParseMeshString(s, field)
		if err != nil {
			return nil, err
		}
		m = parsed
	case '{':
		var o MeshObject
		if err := decodeBytes(raw, &o); err != nil {
			return nil, prefixProblem(err, field)
		}
		if o.Axes == nil {
			return nil, sharding.Fieldf(field+".axes", `is required: a list of {"name": "x", "size": 2}, major to minor`)
		}
		if lim.MaxMeshAxes > 0 && len(o.Axes) > lim.MaxMeshAxes {
			return nil, limitExceeded(field+".axes", "mesh has %d axes; the limit is %d (SHARDPLAN_MAX_MESH_AXES)", len(o.Axes), lim.MaxMeshAxes)
		}
		m = &sharding.Mesh{Name: o.Name, DeviceIDs: o.DeviceIDs}
		for _, a := range o.Axes {
			m.Axes = append(m.Axes, sharding.Axis{Name: a.Name, Size: a.Size})
		}
		// Check the device count before Validate builds the device-id index.
		if n, ok := deviceCount(m.Axes); ok && lim.MaxDevices > 0 && n > int64(lim.MaxDevices) {
			return nil, tooManyDevices(field, n, lim)
		}
		if err := m.Validate(field); err != nil {
			return nil, err
		}
	default:
		return nil, sharding.Fieldf(field, `must be an object {"axes": [...]} or a string "x=2,y=4"`)
	}
	if lim.MaxMeshAxes > 0 && len(m.Axes) > lim.MaxMeshAxes {
		return nil, limitExceeded(field, "mesh has %d axes; the limit is %d (SHARDPLAN_MAX_MESH_AXES)", len(m.Axes), lim.MaxMeshAxes)
	}
	if n := int64(m.NumDevices()); lim.MaxDevices > 0 && n > int64(lim.MaxDevices) {
		return nil, tooManyDevices(field, n, lim)
	}
	return m, nil
}

func tooManyDevices(field string, n int64, lim Limits) *Problem {
	return limitExceeded(field, "mesh has %d devices; the limit is %d (SHARDPLAN_MAX_DEVICES)", n, lim.MaxDevices)
}

// deviceCount is the product of the axis sizes, ok false when a size is < 1 or the
// product overflows.
func deviceCount(axes []sharding.Axis) (int64, bool) {
	n := int64(1)
	for _, a := range axes {
		if a.Size < 1 {
			return 0, false
		}
		hi, lo := bits.Mul64(uint64(n), uint64(a.Size))
		if hi != 0 || lo > 1<<62 {
			return 1 << 62, true
		}
		n = int64(lo)
	}
	return n, true
}

// prefixProblem puts field in front of every field path of a decode problem for a
// nested value (the mesh object is decoded on its own).
func prefixProblem(err error, field string) error {
	p, ok := err.(*Problem)
	if !ok {
		return err
	}
	out := *p
	fes := make(sharding.Errors, len(p.Errors))
	for i, fe := range p.Errors {
		f := field
		if fe.Field != "" {
			f = field + "." + fe.Field
		}
		fes[i] = &sharding.FieldError{Field: f, Message: fe.Message}
	}
	if len(fes) > 0 {
		return Invalid(slugInvalidMesh, "Invalid mesh", fes...)
	}
	out.Detail = field + ": " + p.Detail
	return &out
}

// maxElements is the hard ceiling of Limits.MaxElements: a tensor's byte size (up to
// 128 bits per element) stays inside int64.
const maxElements = int64(1) << 55

// checkShape enforces the rank limit and the element limit (Limits.MaxElements, at most
// maxElements) on a shape; dims must be >= 1. Every path that takes a tensor (tiles,
// reshard, graph tensors, module values) checks its shapes with it.
func checkShape(shape []int64, field string, lim Limits) error {
	return shapeWithin(shape, field, lim, 1)
}

// shapeWithin is checkShape with the least dim allowed (graph tensors may have dims of
// 0, tiles and reshards may not).
func shapeWithin(shape []int64, field string, lim Limits, least int64) error {
	if lim.MaxRank > 0 && len(shape) > lim.MaxRank {
		return limitExceeded(field, "has rank %d; the limit is %d (SHARDPLAN_MAX_RANK)", len(shape), lim.MaxRank)
	}
	most := maxElements
	if lim.MaxElements > 0 && lim.MaxElements < most {
		most = lim.MaxElements
	}
	n := int64(1)
	for d, v := range shape {
		if v < least {
			return sharding.Fieldf(field+"["+itoa(d)+"]", "must be >= %d (got %d)", least, v)
		}
		if v == 0 {
			return nil // no elements
		}
		if v > most || n > most/v {
			return limitExceeded(field, "has more than %d elements, the limit (SHARDPLAN_MAX_ELEMENTS); plan a smaller tensor", most)
		}
		n *= v
	}
	return nil
}

// elementBits returns the element size in bits from dtype or element_bytes (exactly one
// must be given). An unknown dtype is a 400 listing the known ones.
func elementBits(dtype string, elementBytes *int, dtypeField string) (int, error) {
	switch {
	case dtype != "" && elementBytes != nil:
		return 0, sharding.Fieldf(dtypeField, "give dtype or element_bytes, not both")
	case elementBytes != nil:
		return *elementBytes * 8, nil
	case dtype == "":
		return 0, sharding.Fieldf(dtypeField, "is required (one of: %s), or give element_bytes", sharding.KnownDTypes())
	}
	b, ok := sharding.DTypeBits(dtype)
	if !ok {
		return 0, sharding.Fieldf(dtypeField, "unknown dtype %q; known dtypes: %s", dtype, sharding.KnownDTypes())
	}
	return b, nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// tensorType fills shape and dtype from a printed tensor type ("tensor<8x16xf32>",
// "f32[8,16]") given instead of them; it is a 400 to give both.
func tensorType(tensor string, shape *[]int64, dtype *string, elementBytes *int) error {
	if tensor == "" {
		return nil
	}
	if len(*shape) > 0 || *dtype != "" || elementBytes != nil {
		return sharding.Fieldf("tensor", "give tensor, or shape with dtype (or element_bytes), not both")
	}
	s, d, err := sharding.ParseTensorType(tensor, "tensor")
	if err != nil {
		return err
	}
	if len(s) == 0 {
		return sharding.Fieldf("tensor", "%q is a scalar; shardplan lays out tensors of rank >= 1", tensor)
	}
	*shape, *dtype = s, d
	return nil
}

// allowRemat reads a request's full_rematerialization (validated: "", avoid or allow):
// allow, refused beside a policy that forbids the plans it asks for.
func allowRemat(opt string, policy *Policy) (bool, error) {
	if opt != "allow" {
		return false, nil
	}
	if policy.forbidsRemat() {
		return false, Invalid(slugInvalidRequest, "Contradictory options", sharding.Fieldf("full_rematerialization",
			"allow lets the planner choose a plan that rematerializes, which policy.forbid_full_rematerialization refuses: leave one of them out"))
	}
	return true, nil
}

// effortOf reads a request's effort (validated: "", thorough, fast or exhaustive).
func effortOf(opt string) planner.Effort {
	switch opt {
	case string(planner.EffortFast):
		return planner.EffortFast
	case string(planner.EffortExhaustive):
		return planner.EffortExhaustive
	}
	return planner.EffortThorough
}

func appendFieldErrors(fes sharding.Errors, err error) sharding.Errors {
	if more, ok := sharding.AsFieldErrors(err); ok {
		return append(fes, more...)
	}
	return append(fes, sharding.Fieldf("", "%v", err))
}

// modelFingerprint names model in a plan id by everything its answers depend on: the
// name and every figure (cost.Fabric.Fingerprint), so two requests share a plan id only
// when their models price alike. A model without a fingerprint (none the API resolves)
// is named by its name.
func modelFingerprint(model cost.Model) string {
	if cm, ok := model.(interface{ Fingerprint() string }); ok {
		return cm.Fingerprint()
	}
	return model.Name()
}
