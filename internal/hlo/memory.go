package hlo

import "context"

// MemoryPoint is one device's live buffers at one instruction of the entry computation.
type MemoryPoint struct {
	Instr     string
	Line      int
	LiveBytes int64
}

// Memory is an estimate of one device's memory over the entry computation's schedule.
type Memory struct {
	Timeline  []MemoryPoint
	PeakBytes int64
	PeakIndex int
	// HeldBytes are the parameters' and the root's buffers, live throughout.
	HeldBytes int64
}

// aliasOps make no buffer of their own: their value is (part of) their operands'.
var aliasOps = map[string]bool{"bitcast": true, "get-tuple-element": true, "tuple": true, "opt-barrier": true}

// Memory estimates one device's live bytes at each instruction of the entry computation
// in its printed order (a scheduled module prints its schedule): every instruction's
// result is a buffer from its definition to its last use (through bitcasts, tuples and
// get-tuple-elements, which alias their operands), parameters and the root's buffers
// live throughout. XLA's buffer assignment may reuse or share buffers this counts apart
// (fusion outputs written in place, donated parameters), so the figure is an upper
// estimate of what the schedule needs. It stops with ctx's error when ctx ends.
func (a *Analysis) Memory(ctx context.Context) (Memory, error) {
	comp := a.Module.Entry
	n := len(comp.Instrs)
	mem := Memory{Timeline: make([]MemoryPoint, n)}
	if n == 0 {
		return mem, nil
	}
	owners := make(map[string][]string, n) // instruction -> the buffers it aliases (itself when it makes one)
	def := make(map[string]int, n)
	last := make(map[string]int, n)
	held := map[string]bool{}
	for i, in := range comp.Instrs {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return mem, err
			}
		}
		if aliasOps[in.Opcode] {
			var os []string
			for _, op := range in.Operands {
				os = append(os, owners[op]...)
			}
			owners[in.Name] = os
		} else {
			owners[in.Name] = []string{in.Name}
			def[in.Name], last[in.Name] = i, i
		}
		for _, op := range in.Operands {
			for _, o := range owners[op] {
				last[o] = max(last[o], i)
			}
		}
		if in.Opcode == "parameter" {
			held[in.Name] = true
		}
		if in.Root {
			for _, o := range owners[in.Name] {
				held[o] = true
			}
		}
	}
	diff := make([]int64, n+1)
	for _, in := range comp.Instrs {
		d, ok := def[in.Name]
		if !ok {
			continue
		}
		b := in.Shape.Bytes()
		from, to := d, last[in.Name]
		if held[in.Name] {
			from, to = 0, n-1
			mem.HeldBytes += b
		}
		diff[from] += b
		diff[to+1] -= b
	}
	var live int64
	for i, in := range comp.Instrs {
		live += diff[i]
		line, _ := a.Module.LineCol(in.Pos)
		mem.Timeline[i] = MemoryPoint{Instr: in.Name, Line: line, LiveBytes: live}
		if live > mem.PeakBytes || i == 0 {
			mem.PeakBytes, mem.PeakIndex = live, i
		}
	}
	return mem, ctx.Err()
}
