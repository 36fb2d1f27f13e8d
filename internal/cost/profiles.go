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
	// Collectives, on a GPU model, prices all_gather, reduce_scatter, all_reduce and
	// all_to_all as NCCL runs them (COSTMODEL.md B.5) and point-to-point moves across
	// nodes by their transport; absent, the formulas of B.1-B.4 price them.
	Collectives *CollectivesInfo `json:"collectives,omitempty"`
	// Sources cite the model-level figures (gpus_per_node).
	Sources map[string]string `json:"sources,omitempty"`
}

// CollectivesInfo are the figures of NCCL's algorithms on a GPU model: which the
// fabric offers, and per algorithm the fraction of the link figures it reaches, its
// efficiency curve over message size and its latency.
type CollectivesInfo struct {
	// NVLS: the NVLink domain reduces in the switch (NVSwitch SHARP: H100, H200, B200,
	// GB200), enabling the nvls and nvls_tree all_reduce algorithms.
	NVLS bool `json:"nvls,omitempty"`
	// CollNet: the network reduces in its switches (InfiniBand SHARP), enabling the
	// collnet all_reduce across nodes.
	CollNet bool `json:"collnet,omitempty"`
	// Algorithms are the figures per algorithm: "ring" (all_gather, reduce_scatter,
	// all_reduce), "tree" (all_reduce across nodes), "nvls", "nvls_tree", "collnet"
	// (all_reduce) and "alltoall" (all_to_all). An algorithm without figures is not
	// used; ring and alltoall are required.
	Algorithms map[string]AlgorithmInfo `json:"algorithms"`
	// P2P prices point-to-point moves (collective_permute, all_to_all_v, transfers).
	P2P *P2PInfo `json:"p2p,omitempty"`
	// Sources cite nvls and collnet.
	Sources map[string]string `json:"sources,omitempty"`
}

// AlgorithmInfo are one algorithm's figures. Its bus bandwidth at size S (nccl-tests'
// size column) is the peak of the links it crosses times their efficiency times
// S/(S + half_bytes); its latency is the links' base_latency_us plus base_latency_us
// plus its steps at the links' latency_us. A group that spans nodes uses
// net_half_bytes for half_bytes and adds net_latency_us.
type AlgorithmInfo struct {
	// NVLinkEfficiency is the fraction of the NVLink figure reached inside a node, in
	// (0, 1]; NetEfficiency the fraction of the NICs' figure (every NIC of the node the
	// group uses together) reached between nodes.
	NVLinkEfficiency float64 `json:"nvlink_efficiency"`
	NetEfficiency    float64 `json:"net_efficiency"`
	// HalfBytes is the size at which the bus bandwidth is half its plateau (>= 0).
	HalfBytes     float64 `json:"half_bytes"`
	BaseLatencyUS float64 `json:"base_latency_us"`
	NetHalfBytes  float64 `json:"net_half_bytes"`
	NetLatencyUS  float64 `json:"net_latency_us"`
	// CurveExponent γ shapes the curve: the bus bandwidth at size S is the plateau
	// times (S/(S + half))^γ, γ in (0, 1]; 0 means 1. Below 1 the ramp is slower.
	CurveExponent float64 `json:"curve_exponent,omitempty"`
	// Sources cite each figure, keyed by its JSON name.
	Sources map[string]string `json:"sources,omitempty"`
}

// P2PInfo is the transport of point-to-point moves between nodes: "nccl" (send/recv
// through NCCL's proxy) or "rdma" (one-sided RDMA writes), the fraction of a NIC's
// figure one pair reaches, and a fixed overhead per message.
type P2PInfo struct {
	Transport     string  `json:"transport"`
	NetEfficiency float64 `json:"net_efficiency"`
	// NVLinkEfficiency is the fraction of the NVLink figure one pair reaches inside a
	// node (0: 1).
	NVLinkEfficiency  float64           `json:"nvlink_efficiency,omitempty"`
	MessageOverheadUS float64           `json:"message_overhead_us"`
	Sources           map[string]string `json:"sources,omitempty"`
}

func (c *CollectivesInfo) clone() *CollectivesInfo {
	if c == nil {
		return nil
	}
	out := *c
	out.Sources = maps.Clone(c.Sources)
	out.Algorithms = make(map[string]AlgorithmInfo, len(c.Algorithms))
	for k, a := range c.Algorithms {
		a.Sources = maps.Clone(a.Sources)
		out.Algorithms[k] = a
	}
	if c.P2P != nil {
		p := *c.P2P
		p.Sources = maps.Clone(p.Sources)
		out.P2P = &p
	}
	return &out
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
	p.Collectives = p.Collectives.clone()
	return p
}
