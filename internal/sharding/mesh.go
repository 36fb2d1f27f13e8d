package sharding

import (
	"regexp"
	"strconv"
	"strings"
)

// MaxMeshDevices is the hard ceiling on a mesh's device count that the vocabulary itself
// accepts (it keeps every product of axis sizes inside int64 arithmetic). Services set a
// lower, configurable limit on top of it.
const MaxMeshDevices = 1 << 30

// Axis is one named mesh axis.
type Axis struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// Mesh is a logical device mesh: named axes major to minor and an optional permutation
// of device ids. The device at row-major position p has id DeviceIDs[p] (p itself when
// DeviceIDs is nil).
type Mesh struct {
	Name      string `json:"name"`
	Axes      []Axis `json:"axes"`
	DeviceIDs []int  `json:"device_ids,omitempty"`

	// position[id] is the row-major position of device id; nil for the identity.
	position []int
	// hloWork counts the device-by-device checks ParseHLO has spent on this mesh's
	// iota tile assignments (see hloWorkLimit); atomic.
	hloWork *int64
}

var axisNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// DefaultMeshName is the name a mesh gets when none is given.
const DefaultMeshName = "mesh"

// ParseMeshString parses the "x=2,y=4" form, or a mesh as JAX, Shardy or torch print it
// (meshforms.go). field is the wire path used in errors.
func ParseMeshString(s, field string) (*Mesh, error) {
	if form := MeshForm(s); form != "" {
		return parsePrintedMesh(s, form, field)
	}
	m := &Mesh{Name: DefaultMeshName}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, Fieldf(field, `empty mesh; write axes as "name=size" pairs, e.g. "x=2,y=4"`)
	}
	for i, part := range strings.Split(s, ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, Fieldf(field, "axis %d (%q) is not name=size; write e.g. \"x=2,y=4\"", i, part)
		}
		n, err := strconv.Atoi(strings.TrimSpace(size))
		if err != nil {
			return nil, Fieldf(field, "axis %q has size %q, which is not an integer", strings.TrimSpace(name), strings.TrimSpace(size))
		}
		m.Axes = append(m.Axes, Axis{Name: strings.TrimSpace(name), Size: n})
	}
	if err := m.Validate(""); err != nil {
		// The string form has no axes[i] paths on the wire: every error names field,
		// and the messages name the axis.
		es, _ := AsFieldErrors(err)
		out := make(Errors, len(es))
		for i, e := range es {
			out[i] = Fieldf(field, "%s", e.Message)
		}
		return nil, out
	}
	return m, nil
}

// NewMesh builds and validates a mesh. deviceIDs may be nil.
func NewMesh(name string, axes []Axis, deviceIDs []int) (*Mesh, error) {
	if name == "" {
		name = DefaultMeshName
	}
	m := &Mesh{Name: name, Axes: axes, DeviceIDs: deviceIDs}
	if err := m.Validate(""); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks names, sizes and the device permutation, and prepares the id index.
// Errors name fields under field ("mesh.axes[1].size").
func (m *Mesh) Validate(field string) error {
	var errs Errors
	if m.Name == "" {
		m.Name = DefaultMeshName
	} else if !axisNameRE.MatchString(m.Name) {
		errs = append(errs, Fieldf(join(field, "name"), "mesh name %q must match [A-Za-z_][A-Za-z0-9_]*", m.Name))
	}
	seen := map[string]int{}
	total := int64(1)
	for i, a := range m.Axes {
		f := index(join(field, "axes"), i)
		if !axisNameRE.MatchString(a.Name) {
			errs = append(errs, Fieldf(join(f, "name"), "axis name %q must match [A-Za-z_][A-Za-z0-9_]*", a.Name))
		}
		if j, dup := seen[a.Name]; dup {
			errs = append(errs, Fieldf(join(f, "name"), "axis %q is already axis %d; axis names must be unique", a.Name, j))
		}
		seen[a.Name] = i
		if a.Size < 1 {
			errs = append(errs, Fieldf(join(f, "size"), "axis %q has size %d; sizes must be >= 1", a.Name, a.Size))
			continue
		}
		// Compare before multiplying: total*size could overflow int64 and wrap to a
		// small (even zero) device count.
		if int64(a.Size) > MaxMeshDevices/total {
			errs = append(errs, Fieldf(join(f, "size"), "the mesh has more than %d devices; use fewer or smaller axes", MaxMeshDevices))
			return errs
		}
		total *= int64(a.Size)
	}
	if len(errs) > 0 {
		return errs
	}
	n := int(total)
	m.position = nil
	m.hloWork = new(int64)
	if m.DeviceIDs != nil {
		f := join(field, "device_ids")
		if len(m.DeviceIDs) != n {
			return Fieldf(f, "has %d ids but the mesh has %d devices; give a permutation of 0..%d", len(m.DeviceIDs), n, n-1)
		}
		pos := make([]int, n)
		for i := range pos {
			pos[i] = -1
		}
		identity := true
		for p, id := range m.DeviceIDs {
			if id < 0 || id >= n {
				return Fieldf(index(f, p), "device id %d is outside 0..%d; give a permutation of 0..%d", id, n-1, n-1)
			}
			if pos[id] >= 0 {
				return Fieldf(index(f, p), "device id %d appears twice (also at [%d]); give a permutation of 0..%d", id, pos[id], n-1)
			}
			pos[id] = p
			identity = identity && id == p
		}
		if identity {
			m.DeviceIDs = nil // canonical: the identity permutation is the default
		} else {
			m.position = pos
		}
	}
	return nil
}

// NumDevices is the product of the axis sizes.
func (m *Mesh) NumDevices() int {
	n := 1
	for _, a := range m.Axes {
		n *= a.Size
	}
	return n
}

// AxisIndex returns the index of the named axis, or -1.
func (m *Mesh) AxisIndex(name string) int {
	for i, a := range m.Axes {
		if a.Name == name {
			return i
		}
	}
	return -1
}

// AxisSize returns the size of the named axis, or 0 when there is none.
func (m *Mesh) AxisSize(name string) int {
	if i := m.AxisIndex(name); i >= 0 {
		return m.Axes[i].Size
	}
	return 0
}

// DeviceAt returns the id of the device at row-major position p.
func (m *Mesh) DeviceAt(p int) int {
	if m.DeviceIDs == nil {
		return p
	}
	return m.DeviceIDs[p]
}

// PositionOf returns the row-major position of device id.
func (m *Mesh) PositionOf(id int) int {
	if m.position == nil {
		return id
	}
	return m.position[id]
}

// Coords writes the coordinates of row-major position p into dst (len = number of axes)
// and returns it.
func (m *Mesh) Coords(p int, dst []int) []int {
	if cap(dst) < len(m.Axes) {
		dst = make([]int, len(m.Axes))
	}
	dst = dst[:len(m.Axes)]
	for i := len(m.Axes) - 1; i >= 0; i-- {
		dst[i] = p % m.Axes[i].Size
		p /= m.Axes[i].Size
	}
	return dst
}

// PositionOfCoords is the row-major position of coords.
func (m *Mesh) PositionOfCoords(coords []int) int {
	p := 0
	for i, a := range m.Axes {
		p = p*a.Size + coords[i]
	}
	return p
}

// Stride returns the row-major position stride of the named axis: the product of the
// sizes of the axes minor to it.
func (m *Mesh) Stride(name string) int {
	s := 1
	for i := len(m.Axes) - 1; i >= 0; i-- {
		if m.Axes[i].Name == name {
			return s
		}
		s *= m.Axes[i].Size
	}
	return 0
}

// String is the "x=2,y=4" form (without device ids).
func (m *Mesh) String() string {
	var b strings.Builder
	for i, a := range m.Axes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.Name)
		b.WriteByte('=')
		b.WriteString(itoa(a.Size))
	}
	return b.String()
}

// SameLayout reports whether two meshes have the same axes and device order (names of
// the meshes may differ).
func (m *Mesh) SameLayout(o *Mesh) bool {
	if len(m.Axes) != len(o.Axes) || len(m.DeviceIDs) != len(o.DeviceIDs) {
		return false
	}
	for i := range m.Axes {
		if m.Axes[i] != o.Axes[i] {
			return false
		}
	}
	for i := range m.DeviceIDs {
		if m.DeviceIDs[i] != o.DeviceIDs[i] {
			return false
		}
	}
	return true
}
