package cost

import (
	_ "embed"
	"encoding/json"
	"sync"
)

// Roofline is one device's compute roof: its peak dense bf16 FLOP rate and its HBM
// bandwidth, with the sources of both. A compute op takes the longer of its FLOPs at
// the peak and its bytes at the bandwidth.
type Roofline struct {
	PeakBF16TFLOPS float64           `json:"peak_bf16_tflops"`
	HBMGBps        float64           `json:"hbm_gbps"`
	Sources        map[string]string `json:"sources"`
}

// TimeUS is the roofline time in microseconds of an op of flops floating-point
// operations that reads and writes bytes of device memory.
func (r Roofline) TimeUS(flops, bytes float64) float64 {
	var t float64
	if r.PeakBF16TFLOPS > 0 {
		t = flops / (r.PeakBF16TFLOPS * 1e6)
	}
	if r.HBMGBps > 0 {
		t = max(t, bytes/(r.HBMGBps*1e3))
	}
	return t
}

//go:embed roofline.json
var rooflineJSON []byte

var rooflines = sync.OnceValue(func() map[string]Roofline {
	var m map[string]Roofline
	if err := json.Unmarshal(rooflineJSON, &m); err != nil {
		panic("cost: roofline.json is invalid: " + err.Error()) // a build defect, never input
	}
	return m
})

// RooflineOf returns the compute roof of the built-in profile named name (or an alias
// of it); ok is false for models without one (custom fabrics).
func RooflineOf(name string) (Roofline, bool) {
	if p, ok := Lookup(name); ok {
		name = p.Name
	}
	r, ok := rooflines()[name]
	return r, ok
}
