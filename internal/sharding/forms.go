package sharding

// ObjectDim is one dim of the object form: {"axes": ["z", "y"], "open": true, "priority": 1}.
type ObjectDim struct {
	Axes     []string `json:"axes"`
	Open     bool     `json:"open,omitempty"`
	Priority *int     `json:"priority,omitempty"`
}

// ObjectForm is the canonical object form of a sharding on the wire (API.md "Sharding"):
// dims, replicated, unreduced and the Shardy text. Parse accepts it back (text ignored).
type ObjectForm struct {
	Dims       []ObjectDim `json:"dims"`
	Replicated []string    `json:"replicated,omitempty"`
	Unreduced  []string    `json:"unreduced,omitempty"`
	Text       string      `json:"text,omitempty"`
}

// Object returns s in the object form; Text is s.Text(meshName). Every dim's Axes is
// non-nil, so it encodes as [] rather than null.
func (s Sharding) Object(meshName string) ObjectForm {
	o := ObjectForm{Dims: make([]ObjectDim, len(s.Dims)), Text: s.Text(meshName)}
	for i, d := range s.Dims {
		o.Dims[i] = ObjectDim{Axes: refNames(d.Axes), Open: d.Open}
		if d.Priority != NoPriority {
			p := d.Priority
			o.Dims[i].Priority = &p
		}
	}
	if len(s.Replicated) > 0 {
		o.Replicated = refNames(s.Replicated)
	}
	if len(s.Unreduced) > 0 {
		o.Unreduced = refNames(s.Unreduced)
	}
	return o
}

func refNames(refs []AxisRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

// PartitionSpec returns s as a PartitionSpec-like array: per dim nil (not sharded), the
// axis name (one axis) or the names major to minor (several; sub-axes as "x:(m)k").
// ok is false when s has what the array form cannot say: open dims, priorities,
// replicated or unreduced axes.
func (s Sharding) PartitionSpec() (spec []any, ok bool) {
	if len(s.Replicated) > 0 || len(s.Unreduced) > 0 {
		return nil, false
	}
	spec = make([]any, len(s.Dims))
	for i, d := range s.Dims {
		if d.Open || d.Priority != NoPriority {
			return nil, false
		}
		switch len(d.Axes) {
		case 0:
			spec[i] = nil
		case 1:
			spec[i] = d.Axes[0].String()
		default:
			spec[i] = refNames(d.Axes)
		}
	}
	return spec, true
}
