package cost

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/shardplan/shardplan/internal/fielderr"
)

// Resolve reads a request's cost_model value. field is its wire path ("cost_model").
//
//   - absent or null: the default profile, DefaultProfile;
//   - a string: a built-in profile name or alias (GET /v1/cost-models);
//   - an object: a ProfileInfo document plus an optional "base". With "base", the
//     object starts from that profile and every field given overrides it (links merge
//     per class and per figure, axis_links and sources per key); without it, the object
//     is a whole model. For example
//     {"base": "h100", "efficiency": 0.824, "axis_links": {"data": "ib"}} or
//     {"name": "lab", "links": {"ici": {"bandwidth_gbps": 50, "latency_us": 1,
//     "topology": "ring_bidi"}}}. "sources" merge like the figures, and a figure the
//     request sets without citing it is cited as "given in the request"; "aliases" is
//     accepted and ignored, so a GET /v1/cost-models/{name} document is itself valid.
//     A custom model may take a built-in profile's name only when its figures equal
//     that profile's (it then is that profile). Unnamed, it is called "custom", or
//     "<base>+custom" when it changes a base's figures.
//
// Every error is a *fielderr.FieldError whose Field is the path under field
// ("cost_model.links.ici.bandwidth_gbps") and whose message says how to fix it;
// unknown fields are errors naming the field. Resolve never panics.
func Resolve(raw json.RawMessage, field string) (Model, error) {
	m, err := resolve(raw, field)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func resolve(raw json.RawMessage, field string) (*Fabric, *fielderr.FieldError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		m, _ := Profile(DefaultProfile)
		return m, nil
	}
	switch raw[0] {
	case '"':
		s, err := str(raw, field)
		if err != nil {
			return nil, err
		}
		m, ok := Profile(s)
		if !ok {
			return nil, fielderr.New(field, "unknown cost model %q; use one of %s, or an object (see GET /v1/cost-models)", s, profileNames())
		}
		return m, nil
	case '{':
		return resolveObject(raw, field)
	}
	return nil, fielderr.New(field, "must be a profile name such as %q or an object, not %s", DefaultProfile, jsonKind(raw))
}

var (
	modelFields = []string{"aliases", "axis_links", "base", "collectives", "description", "efficiency", "gpus_per_node", "hierarchy", "links", "mode", "name", "sources"}
	linkFields  = []string{"bandwidth_gbps", "base_latency_us", "latency_us", "links_per_chip", "sources", "topology", "wrap"}
)

// fromRequest is the source given to figures a request sets.
const fromRequest = "given in the request"

func resolveObject(raw json.RawMessage, field string) (*Fabric, *fielderr.FieldError) {
	obj, err := object(raw, field, modelFields)
	if err != nil {
		return nil, err
	}
	p := ProfileInfo{}
	name, overrides := "custom", false
	if b, ok := obj["base"]; ok {
		s, err := str(b, join(field, "base"))
		if err != nil {
			return nil, err
		}
		info, ok := Lookup(s)
		if !ok {
			return nil, fielderr.New(join(field, "base"), "unknown profile %q; use one of %s", s, profileNames())
		}
		p, name = info, info.Name
		p.Aliases = nil
	} else {
		overrides = true
	}
	for _, k := range sortedKeys(obj) {
		v, f := obj[k], join(field, k)
		var err *fielderr.FieldError
		switch k {
		case "name":
			p.Name, err = str(v, f)
		case "description":
			p.Description, err = str(v, f)
		case "aliases":
			var a []string
			if json.Unmarshal(v, &a) != nil {
				err = fielderr.New(f, "must be an array of strings (it is ignored)")
			}
		case "mode":
			p.Mode, err = str(v, f)
		case "hierarchy":
			p.Hierarchy, err = str(v, f)
		case "efficiency":
			p.Efficiency, err = num(v, f)
			if err == nil && p.Efficiency == 0 {
				err = fielderr.New(f, "is 0; give the achievable fraction of peak bandwidth in [%g, 1], e.g. 0.824", minEfficiency)
			}
			p.Sources = setSource(p.Sources, k)
		case "gpus_per_node":
			p.GPUsPerNode, err = integer(v, f)
			p.Sources = setSource(p.Sources, k)
		case "axis_links":
			p.AxisLinks, err = mergeStrings(p.AxisLinks, v, f)
		case "sources":
			p.Sources, err = mergeStrings(p.Sources, v, f)
		case "links":
			p.Links, err = mergeLinks(p.Links, v, f)
		case "collectives":
			p.Collectives, err = mergeCollectives(p.Collectives, v, f)
		}
		if err != nil {
			return nil, err
		}
		overrides = overrides || !slices.Contains([]string{"base", "name", "description", "aliases", "sources"}, k)
	}
	if _, ok := obj["name"]; !ok {
		if overrides && name != "custom" {
			if _, ok := obj["description"]; !ok {
				p.Description = "modified " + name + ": " + p.Description
			}
			name += "+custom"
		}
		p.Name = name
	}
	fab, err := build(p, field)
	if err != nil {
		return nil, err
	}
	if b, ok := Profile(fab.Name()); ok {
		if !sameFigures(fab.info, b.info) {
			return nil, fielderr.New(join(field, "name"), "%q is a built-in profile with other figures; choose another name for a custom model", fab.Name())
		}
		return b, nil
	}
	return fab, nil
}

// sameFigures reports whether a and b price every collective alike.
func sameFigures(a, b ProfileInfo) bool {
	if a.Mode != b.Mode || a.Hierarchy != b.Hierarchy || a.Efficiency != b.Efficiency ||
		a.GPUsPerNode != b.GPUsPerNode || !maps.Equal(a.AxisLinks, b.AxisLinks) || len(a.Links) != len(b.Links) ||
		collectivesKey(a.Collectives) != collectivesKey(b.Collectives) {
		return false
	}
	for k, la := range a.Links {
		lb, ok := b.Links[k]
		if !ok || la.BandwidthGBps != lb.BandwidthGBps || la.LatencyUS != lb.LatencyUS ||
			la.BaseLatencyUS != lb.BaseLatencyUS || la.Topology != lb.Topology || la.Wrap != lb.Wrap {
			return false
		}
	}
	return true
}

func mergeLinks(links map[string]LinkInfo, raw json.RawMessage, field string) (map[string]LinkInfo, *fielderr.FieldError) {
	obj, err := object(raw, field, nil)
	if err != nil {
		return nil, err
	}
	if links == nil {
		links = map[string]LinkInfo{}
	}
	for _, class := range sortedKeys(obj) {
		f := join(field, class)
		if _, ok := parseLinkClass(class); !ok {
			return nil, fielderr.New(f, "unknown link class %q; use ici, nvlink, ib or dcn", class)
		}
		lobj, err := object(obj[class], f, linkFields)
		if err != nil {
			return nil, err
		}
		l := links[class]
		l.Sources = maps.Clone(l.Sources)
		for _, k := range sortedKeys(lobj) {
			v, kf := lobj[k], join(f, k)
			var err *fielderr.FieldError
			switch k {
			case "bandwidth_gbps":
				l.BandwidthGBps, err = num(v, kf)
			case "latency_us":
				l.LatencyUS, err = num(v, kf)
			case "base_latency_us":
				l.BaseLatencyUS, err = num(v, kf)
			case "links_per_chip":
				l.LinksPerChip, err = integer(v, kf)
			case "topology":
				l.Topology, err = str(v, kf)
				if _, wrap := lobj["wrap"]; !wrap && l.Topology != "torus" {
					l.Wrap = ""
				}
			case "wrap":
				l.Wrap, err = str(v, kf)
			case "sources":
				l.Sources, err = mergeStrings(l.Sources, v, kf)
			}
			if err != nil {
				return nil, err
			}
			if k != "sources" {
				l.Sources = setSource(l.Sources, k)
			}
		}
		links[class] = l
	}
	return links, nil
}

// setSource cites figure k as given in the request (a "sources" member of the request,
// merged later, can replace that). s is a copy owned by the caller.
func setSource(s map[string]string, k string) map[string]string {
	if s == nil {
		s = map[string]string{}
	}
	s[k] = fromRequest
	return s
}

func mergeStrings(dst map[string]string, raw json.RawMessage, field string) (map[string]string, *fielderr.FieldError) {
	obj, err := object(raw, field, nil)
	if err != nil {
		return nil, err
	}
	dst = maps.Clone(dst)
	if dst == nil {
		dst = map[string]string{}
	}
	for _, k := range sortedKeys(obj) {
		s, err := str(obj[k], join(field, k))
		if err != nil {
			return nil, err
		}
		dst[k] = s
	}
	return dst, nil
}

// object decodes a JSON object; allowed (when non-nil) lists its fields. Null members
// count as absent.
func object(raw json.RawMessage, field string, allowed []string) (map[string]json.RawMessage, *fielderr.FieldError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fielderr.New(field, "must be an object, not %s", jsonKind(raw))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fielderr.New(field, "is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	for _, k := range sortedKeys(obj) {
		if string(bytes.TrimSpace(obj[k])) == "null" {
			delete(obj, k)
			continue
		}
		if allowed != nil && !slices.Contains(allowed, k) {
			return nil, fielderr.New(join(field, k), "unknown field; allowed fields are %s", strings.Join(allowed, ", "))
		}
	}
	return obj, nil
}

func str(raw json.RawMessage, field string) (string, *fielderr.FieldError) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		if kind := jsonKind(raw); kind != "a string" {
			return "", fielderr.New(field, "must be a string, not %s", kind)
		}
		return "", fielderr.New(field, "is not a valid JSON string")
	}
	return s, nil
}

func num(raw json.RawMessage, field string) (float64, *fielderr.FieldError) {
	var x float64
	if err := json.Unmarshal(raw, &x); err != nil {
		return 0, fielderr.New(field, "must be a finite number, not %s", jsonKind(raw))
	}
	return x, nil
}

func integer(raw json.RawMessage, field string) (int, *fielderr.FieldError) {
	var x float64
	if json.Unmarshal(raw, &x) != nil || x != math.Trunc(x) || math.Abs(x) > 1<<31 {
		return 0, fielderr.New(field, "must be a whole number, not %s", jsonKind(raw))
	}
	return int(x), nil
}

// jsonKind names the kind of a JSON value for messages.
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if len(raw) > 32 {
			return "the number " + string(raw[:32]) + "..."
		}
		return "the number " + string(raw)
	}
	return "malformed JSON"
}

// join appends a child element to a field path.
func join(base, child string) string {
	if base == "" {
		return child
	}
	return base + "." + child
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func joinKeys[V any](m map[string]V) string {
	return strings.Join(sortedKeys(m), ", ")
}
