package cost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Fingerprint names everything f's answers depend on: its name (answers carry it) and
// every figure that prices a collective (mode, hierarchy, efficiency, GPUs per node,
// axis links, and per link class its bandwidth, latencies, topology and wrap rule).
// Two models share a fingerprint only when they price every collective alike under the
// same name, so a cache keyed by it never serves one model's answer to another.
// Descriptions and sources, which no answer depends on, are left out. The result is
// the name, "#", then the hex SHA-256 of the canonical figures.
func (f *Fabric) Fingerprint() string {
	f.fpOnce.Do(func() {
		type linkFigures struct {
			BandwidthGBps float64 `json:"bw"`
			LatencyUS     float64 `json:"lat"`
			BaseLatencyUS float64 `json:"base"`
			Topology      string  `json:"topo"`
			Wrap          string  `json:"wrap"`
			LinksPerChip  int     `json:"lpc"`
		}
		i := f.info
		links := make(map[string]linkFigures, len(i.Links))
		for k, l := range i.Links {
			links[k] = linkFigures{l.BandwidthGBps, l.LatencyUS, l.BaseLatencyUS, l.Topology, l.Wrap, l.LinksPerChip}
		}
		// json.Marshal writes struct fields in order and map keys sorted, and floats in
		// their shortest exact form: equal figures give equal bytes.
		canon, err := json.Marshal(struct {
			Name        string                 `json:"name"`
			Mode        string                 `json:"mode"`
			Hierarchy   string                 `json:"hierarchy"`
			Efficiency  float64                `json:"efficiency"`
			GPUsPerNode int                    `json:"gpus_per_node"`
			AxisLinks   map[string]string      `json:"axis_links"`
			Links       map[string]linkFigures `json:"links"`
			Collectives string                 `json:"collectives,omitempty"`
		}{i.Name, i.Mode, i.Hierarchy, i.Efficiency, i.GPUsPerNode, i.AxisLinks, links, collectivesKey(i.Collectives)})
		if err != nil {
			panic("cost: fingerprint of validated figures: " + err.Error()) // finite figures always encode
		}
		sum := sha256.Sum256(canon)
		f.fp = i.Name + "#" + hex.EncodeToString(sum[:])
	})
	return f.fp
}
