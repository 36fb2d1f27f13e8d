package api

// The parts of a plan that a reshard answer and a graph answer share (mesh, shardings,
// steps and their lists, summary, suggestions), written member by member in their
// structs' order.

// sharding writes ShardingJSON. A sharding that is one of the last few written (the same
// rendering: shardingWriter gives every step and tensor with a sharding the same slices
// and strings) is copied from where it was written.
func (e *jsonAppender) sharding(s *ShardingJSON) {
	for i := range min(e.nWritten, maxWrittenShardings) {
		if w := &e.written[i]; sameRendering(&w.s, s) {
			e.b = append(e.b, e.b[w.start:w.end]...)
			return
		}
	}
	start := len(e.b)
	e.writeSharding(s)
	e.written[e.nWritten%maxWrittenShardings] = writtenSharding{s: *s, start: start, end: len(e.b)}
	e.nWritten++
}

// writtenSharding is a sharding an appender wrote, at b[start:end].
type writtenSharding struct {
	s          ShardingJSON
	start, end int
}

// sameRendering reports whether a and b are the same rendering: the same dims and lists
// (not only equal ones: the same backing arrays) and equal texts. It never reports two
// different encodings as the same; equal renderings built apart it does not recognize.
func sameRendering(a, b *ShardingJSON) bool {
	return sameSlice(a.Dims, b.Dims) && sameSlice(a.Replicated, b.Replicated) && sameSlice(a.Unreduced, b.Unreduced) &&
		a.Text == b.Text && a.Hlo == b.Hlo && a.PartitionSpec == b.PartitionSpec
}

// sameSlice reports whether a and b have the same length and, when not empty, the same
// first element (the same backing array): the same elements. An empty slice is the same
// as another only when both are nil or both are not (they encode as null and []).
func sameSlice[T any](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return (a == nil) == (b == nil)
	}
	return &a[0] == &b[0]
}

// writeSharding writes ShardingJSON itself.
func (e *jsonAppender) writeSharding(s *ShardingJSON) {
	e.b = append(e.b, `{"dims":`...)
	list(e, s.Dims, func(d *DimShardingJSON) {
		e.strsAt(`{"axes":`, d.Axes)
		if d.Open {
			e.b = append(e.b, `,"open":true`...)
		}
		e.optInt(`,"priority":`, d.Priority)
		e.b = append(e.b, '}')
	})
	if len(s.Replicated) > 0 {
		e.strsAt(`,"replicated":`, s.Replicated)
	}
	if len(s.Unreduced) > 0 {
		e.strsAt(`,"unreduced":`, s.Unreduced)
	}
	e.strAt(`,"text":`, s.Text)
	e.strAt(`,"hlo":`, s.Hlo)
	e.optStr(`,"partition_spec":`, s.PartitionSpec)
	e.b = append(e.b, '}')
}

// xlaNotes writes the omitempty members strategy xla adds to a plan: suggestion_note,
// xla_warning, xla_path.
func (e *jsonAppender) xlaNotes(note, warning string, path []string) {
	e.optStr(`,"suggestion_note":`, note)
	e.optStr(`,"xla_warning":`, warning)
	if len(path) > 0 {
		e.strsAt(`,"xla_path":`, path)
	}
}

// summary writes SummaryJSON.
func (e *jsonAppender) summary(s *SummaryJSON) {
	e.strAt(`{"strategy":`, s.Strategy)
	e.strAt(`,"cost_model":`, s.CostModel)
	e.intAt(`,"collectives":`, int64(s.Collectives))
	e.floatAt(`,"time_us":`, s.TimeUS)
	e.intAt(`,"bytes_per_device":`, s.BytesPerDevice)
	e.intAt(`,"lower_bound_bytes_per_device":`, s.LowerBoundBytesPerDevice)
	e.floatAt(`,"efficiency":`, s.Efficiency)
	e.floatAt(`,"time_lower_bound_us":`, s.TimeLowerBoundUS)
	e.floatAt(`,"time_efficiency":`, s.TimeEfficiency)
	e.intAt(`,"peak_bytes_per_device":`, s.PeakBytesPerDevice)
	e.boolAt(`,"full_rematerialization":`, s.FullRematerialization)
	if s.XLAFallback {
		e.b = append(e.b, `,"xla_fallback":true`...)
	}
	if s.Optimality != "" {
		e.strAt(`,"optimality":`, s.Optimality)
	}
	if s.OptimalityGapUS != 0 {
		e.floatAt(`,"optimality_gap_us":`, s.OptimalityGapUS)
	}
	e.intAt(`,"search_expansions":`, int64(s.SearchExpansions))
	if len(s.Candidates) > 0 {
		e.b = append(e.b, `,"candidates":`...)
		list(e, s.Candidates, func(c *Candidate) {
			e.strAt(`{"name":`, c.Name)
			e.intAt(`,"steps":`, int64(c.Steps))
			e.floatAt(`,"time_us":`, c.TimeUS)
			e.intAt(`,"bytes_per_device":`, c.BytesPerDevice)
			e.boolAt(`,"chosen":`, c.Chosen)
			e.b = append(e.b, '}')
		})
	}
	e.b = append(e.b, '}')
}

// step writes StepJSON; the per-device lists go through encoding/json.
func (e *jsonAppender) step(s *StepJSON) {
	e.strAt(`{"op":`, s.Op)
	if len(s.Dims) > 0 {
		e.b = append(e.b, `,"dims":`...)
		ints(e, s.Dims)
	}
	e.optInt(`,"dim":`, s.Dim)
	e.optInt(`,"split_dim":`, s.SplitDim)
	e.optInt(`,"concat_dim":`, s.ConcatDim)
	e.strsAt(`,"mesh_axes":`, s.MeshAxes)
	if len(s.Pairs) > 0 {
		e.b = append(e.b, `,"pairs":`...)
		e.pairs(s.Pairs)
	}
	if len(s.Transfers) > 0 {
		e.b = append(e.b, `,"transfers":`...)
		e.transfers(s.Transfers)
	}
	if len(s.PairRuns) > 0 {
		e.b = append(e.b, `,"pair_runs":`...)
		list(e, s.PairRuns, func(r *PairRun) {
			e.intAt(`{"from":`, int64(r.From))
			e.intAt(`,"to":`, int64(r.To))
			e.intAt(`,"from_step":`, int64(r.FromStep))
			e.intAt(`,"to_step":`, int64(r.ToStep))
			e.intAt(`,"count":`, int64(r.Count))
			e.b = append(e.b, '}')
		})
	}
	if len(s.TransferRuns) > 0 {
		e.b = append(e.b, `,"transfer_runs":`...)
		list(e, s.TransferRuns, func(r *TransferRun) {
			e.b = append(e.b, `{"first":`...)
			e.transfer(&r.First)
			e.b = append(e.b, `,"step":`...)
			e.transfer(&r.Step)
			e.intAt(`,"count":`, int64(r.Count))
			e.b = append(e.b, '}')
		})
	}
	e.b = append(e.b, `,"before":`...)
	e.sharding(&s.Before)
	e.b = append(e.b, `,"after":`...)
	e.sharding(&s.After)
	e.b = append(e.b, `,"local_shape_before":`...)
	ints(e, s.LocalShapeBefore)
	e.b = append(e.b, `,"local_shape_after":`...)
	ints(e, s.LocalShapeAfter)
	e.intAt(`,"group_size":`, int64(s.GroupSize))
	e.intAt(`,"group_count":`, int64(s.GroupCount))
	e.intAt(`,"bytes_per_device":`, s.BytesPerDevice)
	e.optStr(`,"link":`, s.Link)
	e.floatAt(`,"time_us":`, s.TimeUS)
	e.floatAt(`,"latency_us":`, s.LatencyUS)
	e.floatAt(`,"bandwidth_us":`, s.BandwidthUS)
	e.b = append(e.b, '}')
}

// pairs writes a non-nil list of collective_permute pairs.
func (e *jsonAppender) pairs(ps [][2]int) {
	b := append(e.b, '[')
	for i := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendInt(b, int64(ps[i][0]))
		b = append(b, ',')
		b = appendInt(b, int64(ps[i][1]))
		b = append(b, ']')
	}
	e.b = append(b, ']')
}

// transfers writes a non-nil list of Transfer.
func (e *jsonAppender) transfers(ts []Transfer) {
	e.b = append(e.b, '[')
	for i := range ts {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.transfer(&ts[i])
	}
	e.b = append(e.b, ']')
}

// transfer writes Transfer: the lists of an all_to_all_v step are most of a
// large reshard answer (thousands of transfers on 256 devices), so it appends to a
// local slice and writes every number with appendInt.
func (e *jsonAppender) transfer(t *Transfer) {
	b := append(e.b, `{"from":`...)
	b = appendInt(b, int64(t.From))
	b = append(b, `,"to":`...)
	b = appendInt(b, int64(t.To))
	b = append(b, `,"ranges":`...)
	b = appendRanges(b, t.Ranges)
	b = append(b, `,"source_local":`...)
	b = appendRanges(b, t.SourceLocal)
	b = append(b, `,"target_local":`...)
	b = appendRanges(b, t.TargetLocal)
	b = append(b, `,"bytes":`...)
	b = appendInt(b, t.Bytes)
	e.b = append(b, '}')
}

// appendRanges appends r as encoding/json does: [[lo,hi],...], or null when nil.
func appendRanges(b []byte, r [][2]int64) []byte {
	if r == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range r {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendInt(b, r[i][0])
		b = append(b, ',')
		b = appendInt(b, r[i][1])
		b = append(b, ']')
	}
	return append(b, ']')
}

// mesh writes MeshObject.
func (e *jsonAppender) mesh(m *MeshObject) {
	e.b = append(e.b, '{')
	if m.Name != "" {
		e.strAt(`"name":`, m.Name)
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, `"axes":`...)
	list(e, m.Axes, func(a *MeshAxis) {
		e.strAt(`{"name":`, a.Name)
		e.intAt(`,"size":`, int64(a.Size))
		e.b = append(e.b, '}')
	})
	if len(m.DeviceIDs) > 0 {
		e.b = append(e.b, `,"device_ids":`...)
		ints(e, m.DeviceIDs)
	}
	e.b = append(e.b, '}')
}

// suggestion writes Suggestion.
func (e *jsonAppender) suggestion(sg *Suggestion) {
	e.b = append(e.b, '{')
	if sg.PartitionSpec != "" {
		e.strAt(`"partition_spec":`, sg.PartitionSpec)
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, `"sharding":`...)
	e.sharding(&sg.Sharding)
	e.b = append(e.b, '}')
}
