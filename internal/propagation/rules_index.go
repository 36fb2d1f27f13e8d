package propagation

import (
	"slices"
	"strconv"
)

func concatRule(a attrs, in [][]int64, res []int64) (*Rule, error) {
	dim, err := a.int("dimension", -1)
	if err != nil {
		return nil, err
	}
	if dim < 0 || dim >= int64(len(res)) {
		return nil, a.errf("dimension", "dim %d is out of range for rank %d", dim, len(res))
	}
	var sum int64
	for i, s := range in {
		if len(s) != len(res) {
			return nil, a.errf("", "operand %d has rank %d but the result has rank %d", i, len(s), len(res))
		}
		for d := range s {
			if d != int(dim) && s[d] != res[d] {
				return nil, a.errf("", "operand %d dim %d has size %d but the result has %d", i, d, s[d], res[d])
			}
		}
		sum += s[dim]
	}
	if sum != res[dim] {
		return nil, a.errf("dimension", "operand sizes along dim %d add up to %d but the result has %d", dim, sum, res[dim])
	}
	r := newRule(ranks(in), []int{len(res)})
	for d, n := range res {
		t := FactorPassThrough
		if d == int(dim) {
			t = FactorNeedReplication
		}
		f := r.addFactor(n, t)
		for i := range in {
			r.mapDim(i, d, f)
		}
		r.mapDim(len(in), d, f)
	}
	return r.finish(), nil
}

func sliceRule(a attrs, in, res []int64) (*Rule, error) {
	start, err := a.ints("start_indices", true)
	if err != nil {
		return nil, err
	}
	limit, err := a.ints("limit_indices", true)
	if err != nil {
		return nil, err
	}
	strides, err := a.ints("strides", false)
	if err != nil {
		return nil, err
	}
	if strides == nil {
		strides = make([]int64, len(in))
		for i := range strides {
			strides[i] = 1
		}
	}
	for name, xs := range map[string][]int64{"start_indices": start, "limit_indices": limit, "strides": strides} {
		if len(xs) != len(in) {
			return nil, a.errf(name, "has %d entries but the operand has rank %d", len(xs), len(in))
		}
	}
	if len(res) != len(in) {
		return nil, a.errf("", "the result has rank %d but the operand %d", len(res), len(in))
	}
	r := newRule([]int{len(in)}, []int{len(res)})
	for d, n := range in {
		if start[d] < 0 || start[d] > limit[d] || limit[d] > n {
			return nil, a.errf("limit_indices["+strconv.Itoa(d)+"]", "need 0 <= start (%d) <= limit (%d) <= dim size (%d)", start[d], limit[d], n)
		}
		if strides[d] < 1 {
			return nil, a.errf("strides["+strconv.Itoa(d)+"]", "stride %d must be >= 1", strides[d])
		}
		if want := (limit[d] - start[d] + strides[d] - 1) / strides[d]; res[d] != want {
			return nil, a.errf("limit_indices["+strconv.Itoa(d)+"]", "result dim %d should have size %d, got %d", d, want, res[d])
		}
		t := FactorPassThrough
		if res[d] != n {
			t = FactorPermutation
		}
		f := r.addFactor(n, t)
		r.mapDim(0, d, f)
		r.mapDim(1, d, f)
	}
	return r.finish(), nil
}

func dynamicSliceRule(a attrs, in [][]int64, res []int64) (*Rule, error) {
	x := in[0]
	sizes, err := a.ints("slice_sizes", true)
	if err != nil {
		return nil, err
	}
	if len(sizes) != len(x) {
		return nil, a.errf("slice_sizes", "has %d entries but the operand has rank %d", len(sizes), len(x))
	}
	if !slices.Equal(sizes, res) {
		return nil, a.errf("slice_sizes", "the result shape %v should equal slice_sizes %v", res, sizes)
	}
	for i, s := range in[1:] {
		if len(s) > 1 {
			return nil, a.errf("", "start index operand %d must be a scalar or a vector, got shape %v", i+1, s)
		}
	}
	r := newRule(ranks(in), []int{len(res)})
	for d, n := range x {
		if sizes[d] < 0 || sizes[d] > n {
			return nil, a.errf("slice_sizes["+strconv.Itoa(d)+"]", "slice size %d exceeds dim size %d", sizes[d], n)
		}
		f := r.addFactor(n, FactorPassThrough)
		if sizes[d] != n {
			r.Types[f] = FactorNeedReplication
			r.Blocked[f] = true
		}
		r.mapDim(0, d, f)
		r.mapDim(len(in), d, f)
	}
	return r.finish(), nil
}

func padRule(a attrs, in [][]int64, res []int64) (*Rule, error) {
	x := in[0]
	if len(in) == 2 && len(in[1]) != 0 {
		return nil, a.errf("", "the padding value must be a scalar, got shape %v", in[1])
	}
	lo, err := a.ints("edge_padding_low", true)
	if err != nil {
		return nil, err
	}
	hi, err := a.ints("edge_padding_high", true)
	if err != nil {
		return nil, err
	}
	interior, err := a.ints("interior_padding", false)
	if err != nil {
		return nil, err
	}
	if interior == nil {
		interior = make([]int64, len(x))
	}
	for name, xs := range map[string][]int64{"edge_padding_low": lo, "edge_padding_high": hi, "interior_padding": interior} {
		if len(xs) != len(x) {
			return nil, a.errf(name, "has %d entries but the operand has rank %d", len(xs), len(x))
		}
	}
	if len(res) != len(x) {
		return nil, a.errf("", "the result has rank %d but the operand %d", len(res), len(x))
	}
	r := newRule(ranks(in), []int{len(res)})
	for d, n := range x {
		if interior[d] < 0 {
			return nil, a.errf("interior_padding["+strconv.Itoa(d)+"]", "must be >= 0")
		}
		want := lo[d] + hi[d] + n
		if n > 0 {
			want += (n - 1) * interior[d]
		}
		if want != res[d] {
			return nil, a.errf("edge_padding_high["+strconv.Itoa(d)+"]", "result dim %d should have size %d, got %d", d, want, res[d])
		}
		t := FactorPassThrough
		if lo[d] != 0 || hi[d] != 0 || interior[d] != 0 {
			t = FactorPermutation
		}
		f := r.addFactor(n, t)
		r.mapDim(0, d, f)
		r.mapDim(len(in), d, f)
	}
	return r.finish(), nil
}

// indexedDims are the dimension numbers gather and scatter share: the window dims of
// the result (gather) or updates (scatter), the operand dims dropped from the window,
// the batching dims of the operand and of the indices, the index vector dim, and the
// indices' dims other than it.
type indexedDims struct {
	window, dropped, operandBatch, indexBatch []int
	ivd                                       int
	indexDims                                 []int
}

// indexedDimNames are the StableHLO names of indexedDims' lists, in field order.
type indexedDimNames struct{ window, dropped, operandBatch, indexBatch string }

// readIndexedDims reads and checks the shared dimension numbers of a gather or scatter
// whose window tensor, operand and indices have the given ranks.
func readIndexedDims(d attrs, names indexedDimNames, windowRank, operandRank, idxRank int) (indexedDims, error) {
	var dn indexedDims
	var err error
	if dn.window, err = d.dimList(names.window, windowRank, false); err != nil {
		return dn, err
	}
	if dn.dropped, err = d.dimList(names.dropped, operandRank, false); err != nil {
		return dn, err
	}
	if dn.operandBatch, err = d.dimList(names.operandBatch, operandRank, false); err != nil {
		return dn, err
	}
	if dn.indexBatch, err = d.dimList(names.indexBatch, idxRank, false); err != nil {
		return dn, err
	}
	ivd, err := d.int("index_vector_dim", int64(idxRank))
	if err != nil {
		return dn, err
	}
	dn.ivd = int(ivd)
	if dn.ivd < 0 || dn.ivd > idxRank {
		return dn, d.errf("index_vector_dim", "dim %d is out of range for indices of rank %d", dn.ivd, idxRank)
	}
	if slices.Contains(dn.indexBatch, dn.ivd) {
		return dn, d.errf(names.indexBatch, "includes the index vector dim %d", dn.ivd)
	}
	if len(dn.operandBatch) != len(dn.indexBatch) {
		return dn, d.errf(names.indexBatch, "has %d dims but %s has %d", len(dn.indexBatch), names.operandBatch, len(dn.operandBatch))
	}
	for i := range idxRank {
		if i != dn.ivd {
			dn.indexDims = append(dn.indexDims, i)
		}
	}
	return dn, nil
}

func gatherRule(a attrs, x, idx, res []int64) (*Rule, error) {
	d := a.sub("dimension_numbers", "gather_dimension_numbers")
	dn, err := readIndexedDims(d, gatherDimNames, len(res), len(x), len(idx))
	if err != nil {
		return nil, err
	}
	offset, collapsed, opBatch, idxBatch, ivd := dn.window, dn.dropped, dn.operandBatch, dn.indexBatch, dn.ivd
	sizes, err := a.ints("slice_sizes", true)
	if err != nil {
		return nil, err
	}
	if len(sizes) != len(x) {
		return nil, a.errf("slice_sizes", "has %d entries but the operand has rank %d", len(sizes), len(x))
	}
	var offsetOperandDims []int
	for od := range x {
		if sizes[od] < 0 || sizes[od] > x[od] {
			return nil, a.errf("slice_sizes["+strconv.Itoa(od)+"]", "slice size %d exceeds operand dim size %d", sizes[od], x[od])
		}
		if slices.Contains(collapsed, od) || slices.Contains(opBatch, od) {
			if sizes[od] > 1 {
				return nil, a.errf("slice_sizes["+strconv.Itoa(od)+"]", "collapsed or batching dim %d must have slice size <= 1", od)
			}
			if slices.Contains(collapsed, od) && slices.Contains(opBatch, od) {
				return nil, d.errf("collapsed_slice_dims", "dim %d is also an operand batching dim", od)
			}
			continue
		}
		offsetOperandDims = append(offsetOperandDims, od)
	}
	if len(offsetOperandDims) != len(offset) {
		return nil, d.errf("offset_dims", "has %d dims but the operand has %d uncollapsed, non-batching dims", len(offset), len(offsetOperandDims))
	}
	batchIdxDims := dn.indexDims
	if len(res) != len(batchIdxDims)+len(offset) {
		return nil, a.errf("", "the result has rank %d but should have %d (%d batch + %d offset dims)", len(res), len(batchIdxDims)+len(offset), len(batchIdxDims), len(offset))
	}
	r := newRule([]int{len(x), len(idx)}, []int{len(res)})
	const xT, iT, rT = 0, 1, 2
	bi := 0
	sortedOffset := slices.Clone(offset)
	slices.Sort(sortedOffset)
	for rd := range res {
		if slices.Contains(offset, rd) {
			continue
		}
		id := batchIdxDims[bi]
		bi++
		if res[rd] != idx[id] {
			return nil, a.errf("", "result batch dim %d has size %d but indices dim %d has %d", rd, res[rd], id, idx[id])
		}
		f := r.addFactor(res[rd], FactorPassThrough)
		r.mapDim(iT, id, f)
		r.mapDim(rT, rd, f)
		if k := slices.Index(idxBatch, id); k >= 0 {
			if x[opBatch[k]] != idx[id] {
				return nil, d.errf("operand_batching_dims", "operand batching dim %d has size %d but indices dim %d has %d", opBatch[k], x[opBatch[k]], id, idx[id])
			}
			r.mapDim(xT, opBatch[k], f)
		}
	}
	for k, rd := range sortedOffset {
		od := offsetOperandDims[k]
		if res[rd] != sizes[od] {
			return nil, a.errf("slice_sizes["+strconv.Itoa(od)+"]", "result offset dim %d has size %d but the slice size is %d", rd, res[rd], sizes[od])
		}
		switch {
		case sizes[od] == x[od]:
			f := r.addFactor(x[od], FactorPassThrough)
			r.mapDim(xT, od, f)
			r.mapDim(rT, rd, f)
		case sizes[od] == 1:
			r.mapDim(xT, od, r.addFactor(x[od], FactorReduction))
			r.mapDim(rT, rd, r.addFactor(1, FactorNeedReplication))
		default:
			f := r.addFactor(x[od], FactorNeedReplication)
			r.Blocked[f] = true
			r.mapDim(xT, od, f)
			r.mapDim(rT, rd, f)
		}
	}
	for _, od := range collapsed {
		t := FactorReduction
		if x[od] == 1 {
			t = FactorNeedReplication
		}
		r.mapDim(xT, od, r.addFactor(x[od], t))
	}
	if ivd < len(idx) {
		r.mapDim(iT, ivd, r.addFactor(idx[ivd], FactorNeedReplication))
	}
	return r.finish(), nil
}

func scatterRule(a attrs, in, out [][]int64, fail func(string, string, ...any) error) (*Rule, error) {
	n := len(out)
	if n == 0 || len(in) != 2*n+1 {
		return nil, fail("operands", "takes N inputs, the scatter indices and N updates for N results; got %d operands and %d results", len(in), len(out))
	}
	x, idx := in[0], in[n]
	for i := range n {
		if !slices.Equal(in[i], x) || !slices.Equal(out[i], x) {
			return nil, fail("results["+strconv.Itoa(i)+"]", "inputs and results must share one shape %v", x)
		}
	}
	upd := in[n+1]
	for i := range n {
		if !slices.Equal(in[n+1+i], upd) {
			return nil, fail("operands["+strconv.Itoa(n+1+i)+"]", "all updates must share one shape %v", upd)
		}
	}
	d := a.sub("scatter_dimension_numbers", "dimension_numbers")
	dn, err := readIndexedDims(d, scatterDimNames, len(upd), len(x), len(idx))
	if err != nil {
		return nil, err
	}
	window, inserted, inBatch, idxBatch, ivd := dn.window, dn.dropped, dn.operandBatch, dn.indexBatch, dn.ivd
	var windowOperandDims []int
	for od := range x {
		if !slices.Contains(inserted, od) && !slices.Contains(inBatch, od) {
			windowOperandDims = append(windowOperandDims, od)
		}
	}
	if len(windowOperandDims) != len(window) {
		return nil, d.errf("update_window_dims", "has %d dims but the input has %d non-inserted, non-batching dims", len(window), len(windowOperandDims))
	}
	scatterIdxDims := dn.indexDims
	if len(upd) != len(window)+len(scatterIdxDims) {
		return nil, fail("operands["+strconv.Itoa(n+1)+"]", "updates have rank %d but should have %d (%d scatter + %d window dims)", len(upd), len(window)+len(scatterIdxDims), len(scatterIdxDims), len(window))
	}
	r := newRule(ranks(in), ranks(out))
	xf := make([]int, len(x))
	for od, s := range x {
		f := r.addFactor(s, FactorPassThrough)
		xf[od] = f
		for i := range n {
			r.mapDim(i, od, f)
			r.mapDim(len(in)+i, od, f)
		}
	}
	mapUpd := func(ud, f int) {
		for i := range n {
			r.mapDim(n+1+i, ud, f)
		}
	}
	si := 0
	sortedWindow := slices.Clone(window)
	slices.Sort(sortedWindow)
	for ud := range upd {
		if slices.Contains(window, ud) {
			continue
		}
		id := scatterIdxDims[si]
		si++
		if upd[ud] != idx[id] {
			return nil, fail("operands["+strconv.Itoa(n+1)+"]", "update scatter dim %d has size %d but indices dim %d has %d", ud, upd[ud], id, idx[id])
		}
		if k := slices.Index(idxBatch, id); k >= 0 {
			f := xf[inBatch[k]]
			if x[inBatch[k]] != idx[id] {
				return nil, d.errf("input_batching_dims", "input batching dim %d has size %d but indices dim %d has %d", inBatch[k], x[inBatch[k]], id, idx[id])
			}
			r.mapDim(n, id, f)
			mapUpd(ud, f)
			continue
		}
		f := r.addFactor(upd[ud], FactorReduction)
		r.mapDim(n, id, f)
		mapUpd(ud, f)
	}
	for k, ud := range sortedWindow {
		od := windowOperandDims[k]
		if upd[ud] > x[od] {
			return nil, fail("operands["+strconv.Itoa(n+1)+"]", "update window dim %d (size %d) exceeds input dim %d (size %d)", ud, upd[ud], od, x[od])
		}
		if upd[ud] == x[od] {
			mapUpd(ud, xf[od])
			continue
		}
		r.Types[xf[od]] = FactorNeedReplication
		mapUpd(ud, r.addFactor(upd[ud], FactorNeedReplication))
	}
	if ivd < len(idx) {
		r.mapDim(n, ivd, r.addFactor(idx[ivd], FactorNeedReplication))
	}
	return r.finish(), nil
}
