package cost

import (
	"fmt"
)

// Uniform is a fixed-figure model for tests and harnesses: every mesh axis rides one
// "ici" link of switch topology (full bisection, so the mesh layout never matters) with
// bandwidthGBps of egress per device (GB/s, 1e9 B/s) and latencyUS per step, no base
// latency, additive combination. An all_gather of V bytes over N devices then takes
// (N-1)*latencyUS + (N-1)/N*V/(bandwidthGBps*1e3) µs. Uniform panics unless
// bandwidthGBps is in [1e-6, 1e6] and latencyUS in [0, 1e6]: its arguments are
// constants in code, never request input.
func Uniform(bandwidthGBps, latencyUS float64) *Fabric {
	f, err := New(ProfileInfo{
		Name:        "uniform",
		Description: fmt.Sprintf("uniform switch: %g GB/s, %g µs per step on every axis", bandwidthGBps, latencyUS),
		Links: map[string]LinkInfo{"ici": {
			BandwidthGBps: bandwidthGBps,
			LatencyUS:     latencyUS,
			Topology:      "switch",
			Sources:       map[string]string{"bandwidth_gbps": "fixed by the caller", "latency_us": "fixed by the caller"},
		}},
	})
	if err != nil {
		panic(fmt.Sprintf("cost.Uniform(%v, %v): %v", bandwidthGBps, latencyUS, err))
	}
	return f
}
