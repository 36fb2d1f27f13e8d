package cost

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
)

// DefaultProfile is the profile a request gets when it names none.
const DefaultProfile = "tpu-v5p"

// ProfileInfo describes a model: a built-in profile as GET /v1/cost-models lists it, the
// input of New, and (with "base" added) the object form of a request's cost_model. A
// document from GET /v1/cost-models/{name} is itself a valid cost_model object.
type ProfileInfo struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Description string   `json:"description,omitempty"`
	// Mode is how the latency and bandwidth terms combine: "additive" (T = L + B, the
	// default) or "max" (T = max(L, B), scaling-book's form).
	Mode string `json:"mode"`
	// Hierarchy is how the levels of a group that spans several link classes combine:
	// "sequential" (the phases add up, the default) or "overlapped" (pipelined: the
	// slowest phase bounds).
	Hierarchy string `json:"hierarchy"`
	// Efficiency scales every bandwidth: the achievable fraction of the peak, in (0, 1].
	Efficiency float64 `json:"efficiency"`
	// GPUsPerNode > 0 makes a GPU model: a group axis whose device span fits in a node
	// rides "nvlink", any other "ib". 0 puts every axis on "ici".
	GPUsPerNode int `json:"gpus_per_node,omitempty"`
	// AxisLinks overrides the link class of mesh axes by name.
	AxisLinks map[string]string `json:"axis_links,omitempty"`
	// Links are the figures per link class ("ici", "nvlink", "ib", "dcn").
	Links map[string]LinkInfo `json:"links"`
	// Sources cite the model-level figures (gpus_per_node).
	Sources map[string]string `json:"sources,omitempty"`
}

// LinkInfo is one link class's figures. Bandwidth is per link per direction (for a
// switch: the device's egress into it), in GB/s (1e9 B/s).
type LinkInfo struct {
	BandwidthGBps float64 `json:"bandwidth_gbps"`
	// LatencyUS is the latency of one step (hop) in µs; BaseLatencyUS is paid once per
	// collective (software launch), the largest over the links a collective uses.
	LatencyUS     float64 `json:"latency_us"`
	BaseLatencyUS float64 `json:"base_latency_us"`
	// Topology is "torus" (ring per axis, wrapped per Wrap), "ring_bidi", "ring_uni",
	// "line" or "switch".
	Topology string `json:"topology"`
	// Wrap is the wraparound rule of a torus: "always", "never", "size16" (an axis
	// wraps iff its size is 16) or "cube" (every axis on this link wraps iff all of
	// them are multiples of 4 and their product is a multiple of 64).
	Wrap         string `json:"wrap,omitempty"`
	LinksPerChip int    `json:"links_per_chip,omitempty"`
	// Sources cite each figure, keyed by its JSON name.
	Sources map[string]string `json:"sources,omitempty"`
}

//go:embed profiles/*.json
var profileFS embed.FS

// builtin holds the built-in profiles, parsed once; never mutated afterwards.
type builtin struct {
	infos   []ProfileInfo      // sorted by name
	byName  map[string]int     // name or alias -> index in infos
	fabrics map[string]*Fabric // canonical name -> model
}

var builtins = sync.OnceValue(func() *builtin {
	b, err := loadBuiltins()
	if err != nil {
		panic("cost: embedded profiles are invalid: " + err.Error()) // a build defect, never input
	}
	return b
})

func loadBuiltins() (*builtin, error) {
	files, err := profileFS.ReadDir("profiles")
	if err != nil {
		return nil, err
	}
	b := &builtin{byName: map[string]int{}, fabrics: map[string]*Fabric{}}
	for _, f := range files {
		data, err := profileFS.ReadFile(path.Join("profiles", f.Name()))
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var p ProfileInfo
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		fab, err := New(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		b.infos = append(b.infos, fab.Info())
		b.fabrics[p.Name] = fab
	}
	sort.Slice(b.infos, func(i, j int) bool { return b.infos[i].Name < b.infos[j].Name })
	for i, p := range b.infos {
		for _, n := range append([]string{p.Name}, p.Aliases...) {
			if _, dup := b.byName[n]; dup {
				return nil, fmt.Errorf("profile name %q is used twice", n)
			}
			b.byName[n] = i
		}
	}
	return b, nil
}

// Profiles lists the built-in profiles sorted by name. The result is the caller's.
func Profiles() []ProfileInfo {
	b := builtins()
	out := make([]ProfileInfo, len(b.infos))
	for i, p := range b.infos {
		out[i] = p.clone()
	}
	return out
}

// Lookup returns the built-in profile with the given name or alias.
func Lookup(name string) (ProfileInfo, bool) {
	b := builtins()
	i, ok := b.byName[name]
	if !ok {
		return ProfileInfo{}, false
	}
	return b.infos[i].clone(), true
}

// Profile returns the built-in model with the given name or alias.
func Profile(name string) (*Fabric, bool) {
	b := builtins()
	i, ok := b.byName[name]
	if !ok {
		return nil, false
	}
	return b.fabrics[b.infos[i].Name], true
}

// profileNames is the list of known names for error messages: "b200, ..., tpu-v6e
// (aliases: b200-dgx, ...)".
func profileNames() string {
	b := builtins()
	names := make([]string, 0, len(b.infos))
	var aliases []string
	for _, p := range b.infos {
		names = append(names, p.Name)
		aliases = append(aliases, p.Aliases...)
	}
	slices.Sort(aliases)
	return strings.Join(names, ", ") + " (aliases: " + strings.Join(aliases, ", ") + ")"
}

func (p ProfileInfo) clone() ProfileInfo {
	p.Aliases = slices.Clone(p.Aliases)
	p.AxisLinks = maps.Clone(p.AxisLinks)
	p.Sources = maps.Clone(p.Sources)
	links := make(map[string]LinkInfo, len(p.Links))
	for k, l := range p.Links {
		l.Sources = maps.Clone(l.Sources)
		links[k] = l
	}
	p.Links = links
	return p
}
