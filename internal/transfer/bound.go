package transfer

import (
	"context"
	"strconv"
)

// boundLoads are the bytes that must move, whatever the schedule: per target device
// what it needs and does not hold, per node what its devices need that no device in it
// holds (in) and what only it holds that devices elsewhere need (out), per source
// device what only it holds that some other device needs.
type boundLoads struct {
	devNeed, holderOut []float64
	nodeIn, nodeOut    []float64
	netBytes           float64 // bytes that must cross the network: the nodes' in, summed
	moved              bool
}

func newBoundLoads(p *Problem) *boundLoads {
	nodes := (p.Devices + p.Fabric.GPUsPerNode - 1) / p.Fabric.GPUsPerNode
	return &boundLoads{devNeed: make([]float64, p.Devices), holderOut: make([]float64, p.Devices),
		nodeIn: make([]float64, nodes), nodeOut: make([]float64, nodes)}
}

// add charges c's cells, weight times. It stops when ctx ends.
func (b *boundLoads) add(ctx context.Context, f *Fabric, c *class, weight float64) error {
	inNode := map[int]bool{}
	needNodes := map[int]bool{}
	held := map[int32]bool{}
	for ci := range c.cells {
		if ci&63 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		cl := &c.cells[ci]
		w := c.bytesOf(cl.elems) * weight
		clear(inNode)
		holderNode := -1 // the holders' node when they all share one, else -2
		for _, h := range cl.holders {
			inNode[f.Node(int(h))] = true
			switch n := f.Node(int(h)); {
			case holderNode == -1:
				holderNode = n
			case holderNode != n:
				holderNode = -2
			}
		}
		clear(needNodes)
		clear(held)
		for _, h := range cl.holders {
			held[h] = true
		}
		otherThanHolder := false
		for _, d := range cl.needers {
			if !held[d] {
				b.devNeed[d] += w
				b.moved = true
			}
			if len(cl.holders) != 1 || cl.holders[0] != d {
				otherThanHolder = true
			}
			needNodes[f.Node(int(d))] = true
		}
		outside := false
		for n := range needNodes {
			if !inNode[n] {
				b.nodeIn[n] += w
				b.netBytes += w
			}
			if holderNode >= 0 && n != holderNode {
				outside = true
			}
		}
		if outside {
			b.nodeOut[holderNode] += w
		}
		if len(cl.holders) == 1 && otherThanHolder {
			b.holderOut[cl.holders[0]] += w
		}
	}
	return nil
}

// Bound is the fabric's lower bound on a transfer's time, with what binds it.
type Bound struct {
	TimeUS      float64
	LatencyUS   float64
	BandwidthUS float64
	// Binding names the resource: "node N network ingress", "node N network egress",
	// "device D ingress", "device D egress".
	Binding string
	// NetworkBytes is the least number of bytes that must cross the network.
	NetworkBytes float64
	// Terms are the bound's bandwidth terms, each the largest of its kind (µs).
	NodeIngressUS, NodeEgressUS, DeviceIngressUS, DeviceEgressUS float64
}

// bound reads b on p's fabric.
func (b *boundLoads) bound(p *Problem) Bound {
	f := p.Fabric
	var out Bound
	out.NetworkBytes = b.netBytes
	pick := func(t float64, term *float64, kind string, id int, what string) {
		if t > *term {
			*term = t
		}
		if t > out.BandwidthUS {
			out.BandwidthUS = t
			gid := p.globalDevice(id)
			if kind == "node" {
				gid = p.globalNode(id)
			}
			out.Binding = kind + " " + strconv.Itoa(gid) + " " + what
		}
	}
	dev := f.NVLinkBW + f.NICBW
	for d, v := range b.devNeed {
		pick(v/dev, &out.DeviceIngressUS, "device", d, "ingress")
	}
	for d, v := range b.holderOut {
		pick(v/dev, &out.DeviceEgressUS, "device", d, "egress")
	}
	g := f.GPUsPerNode
	for n := range b.nodeIn {
		nics := float64(min(g, p.Devices-n*g))
		pick(b.nodeIn[n]/(nics*f.NICBW), &out.NodeIngressUS, "node", n, "network ingress")
		pick(b.nodeOut[n]/(nics*f.NICBW), &out.NodeEgressUS, "node", n, "network egress")
	}
	if !b.moved {
		return Bound{}
	}
	out.LatencyUS = f.Base + min(f.NVLinkLat, f.NICLat)
	if b.netBytes > 0 {
		out.LatencyUS = f.Base + f.NICLat
	}
	out.TimeUS = f.combine(out.LatencyUS, out.BandwidthUS)
	return out
}
