package propagation

import (
	"strconv"
)

// convRule is the rule of a convolution of input x by kernel k into res: batch and
// output features pass through, input features reduce (or need replication when
// grouped), and each spatial dim is a window over the input.
func convRule(a attrs, x, k, res []int64) (*Rule, error) {
	dn := a.sub("dimension_numbers")
	n := len(x)
	if len(k) != n || len(res) != n || n < 2 {
		return nil, a.errf("", "input, kernel and result must share a rank >= 2, got %d, %d and %d", n, len(k), len(res))
	}
	d, err := readConvDims(dn, n)
	if err != nil {
		return nil, err
	}
	fgc, err := checkConvGroups(a, dn, d, x, k, res)
	if err != nil {
		return nil, err
	}
	w, err := readConvWindow(a, n-2)
	if err != nil {
		return nil, err
	}
	r := newRule([]int{n, n}, []int{n})
	convChannels(r, d, x, k, res, fgc)
	for i := range n - 2 {
		if err := w.spatial(r, dn, d, i, x, k, res); err != nil {
			return nil, err
		}
	}
	return r.finish(), nil
}

// The tensors of a convolution's rule.
const convX, convK, convR = 0, 1, 2

// convDims are a convolution's dimension numbers: input batch and feature, kernel
// input and output feature, output batch and feature, and the spatial dims of each.
type convDims struct {
	ib, ifeat, kin, kout, ob, of int
	is, ks, os                   []int
}

// readConvDims reads and checks the dimension numbers of a rank-n convolution.
func readConvDims(dn attrs, n int) (convDims, error) {
	var d convDims
	one := func(name string, dst *int) error {
		v, err := dn.int(name, -1)
		if err != nil {
			return err
		}
		if v < 0 || v >= int64(n) {
			return dn.errf(name, "is required and must be a dim in 0..%d", n-1)
		}
		*dst = int(v)
		return nil
	}
	for _, c := range []struct {
		name string
		dst  *int
	}{
		{"input_batch_dimension", &d.ib}, {"input_feature_dimension", &d.ifeat},
		{"kernel_input_feature_dimension", &d.kin}, {"kernel_output_feature_dimension", &d.kout},
		{"output_batch_dimension", &d.ob}, {"output_feature_dimension", &d.of},
	} {
		if err := one(c.name, c.dst); err != nil {
			return d, err
		}
	}
	var err error
	if d.is, err = dn.dimList("input_spatial_dimensions", n, true); err != nil {
		return d, err
	}
	if d.ks, err = dn.dimList("kernel_spatial_dimensions", n, true); err != nil {
		return d, err
	}
	if d.os, err = dn.dimList("output_spatial_dimensions", n, true); err != nil {
		return d, err
	}
	if len(d.is) != n-2 || len(d.ks) != n-2 || len(d.os) != n-2 {
		return d, dn.errf("input_spatial_dimensions", "input, kernel and output need %d spatial dims each", n-2)
	}
	if err := distinctDims(dn, "input_spatial_dimensions", append([]int{d.ib, d.ifeat}, d.is...)); err != nil {
		return d, err
	}
	if err := distinctDims(dn, "kernel_spatial_dimensions", append([]int{d.kin, d.kout}, d.ks...)); err != nil {
		return d, err
	}
	return d, distinctDims(dn, "output_spatial_dimensions", append([]int{d.ob, d.of}, d.os...))
}

// distinctDims checks that no dim of ds is used twice; the error names attribute name.
func distinctDims(dn attrs, name string, ds []int) error {
	seen := map[int]bool{}
	for _, d := range ds {
		if seen[d] {
			return dn.errf(name, "dim %d is used twice", d)
		}
		seen[d] = true
	}
	return nil
}

// checkConvGroups reads the feature and batch group counts and checks the feature and
// batch sizes against them; it returns the feature group count.
func checkConvGroups(a, dn attrs, d convDims, x, k, res []int64) (int64, error) {
	fgc, err := a.int("feature_group_count", 1)
	if err != nil {
		return 0, err
	}
	bgc, err := a.int("batch_group_count", 1)
	if err != nil {
		return 0, err
	}
	if fgc < 1 || bgc < 1 {
		return 0, a.errf("feature_group_count", "group counts must be >= 1")
	}
	if k[d.kin]*fgc != x[d.ifeat] {
		return 0, dn.errf("kernel_input_feature_dimension", "kernel input features (%d) x feature_group_count (%d) must equal input features (%d)", k[d.kin], fgc, x[d.ifeat])
	}
	if res[d.of] != k[d.kout] {
		return 0, dn.errf("output_feature_dimension", "output features (%d) must equal kernel output features (%d)", res[d.of], k[d.kout])
	}
	if res[d.ob]*bgc != x[d.ib] {
		return 0, dn.errf("output_batch_dimension", "output batch (%d) x batch_group_count (%d) must equal input batch (%d)", res[d.ob], bgc, x[d.ib])
	}
	return fgc, nil
}

// convChannels adds the factors of the batch and feature dims to r.
func convChannels(r *Rule, d convDims, x, k, res []int64, fgc int64) {
	if x[d.ib] == res[d.ob] {
		f := r.addFactor(res[d.ob], FactorPassThrough)
		r.mapDim(convX, d.ib, f)
		r.mapDim(convR, d.ob, f)
	} else {
		r.mapDim(convX, d.ib, r.addFactor(x[d.ib], FactorNeedReplication))
		r.mapDim(convR, d.ob, r.addFactor(res[d.ob], FactorNeedReplication))
	}
	fo := r.addFactor(res[d.of], FactorPassThrough)
	r.mapDim(convK, d.kout, fo)
	r.mapDim(convR, d.of, fo)
	if fgc == 1 {
		f := r.addFactor(x[d.ifeat], FactorReduction)
		r.mapDim(convX, d.ifeat, f)
		r.mapDim(convK, d.kin, f)
	} else {
		r.mapDim(convX, d.ifeat, r.addFactor(x[d.ifeat], FactorNeedReplication))
		r.mapDim(convK, d.kin, r.addFactor(k[d.kin], FactorNeedReplication))
	}
}

// convWindow is a convolution's window: strides, input and kernel dilations, and
// padding per spatial dim.
type convWindow struct {
	strides, lhsDil, rhsDil []int64
	pad                     [][2]int64
}

func readConvWindow(a attrs, spatial int) (convWindow, error) {
	var w convWindow
	var err error
	if w.strides, err = a.ints("window_strides", false); err != nil {
		return w, err
	}
	if w.lhsDil, err = a.ints("lhs_dilation", false); err != nil {
		return w, err
	}
	if w.rhsDil, err = a.ints("rhs_dilation", false); err != nil {
		return w, err
	}
	w.pad, err = convPadding(a, spatial)
	return w, err
}

// windowAt is xs[i], or 1 when absent or not positive.
func windowAt(xs []int64, i int) int64 {
	if i < len(xs) && xs[i] > 0 {
		return xs[i]
	}
	return 1
}

// spatial checks the size of spatial dim i of the output and adds its factors to r:
// a pass-through when the window is trivial, else a window factor over the output and
// a reduction over the kernel.
func (w convWindow) spatial(r *Rule, dn attrs, d convDims, i int, x, k, res []int64) error {
	in, kw, o := x[d.is[i]], k[d.ks[i]], res[d.os[i]]
	s := windowAt(w.strides, i)
	dilIn := (in-1)*windowAt(w.lhsDil, i) + 1
	dilK := (kw-1)*windowAt(w.rhsDil, i) + 1
	span := dilIn + w.pad[i][0] + w.pad[i][1] - dilK
	want := int64(0)
	if in > 0 && span >= 0 {
		want = span/s + 1
	}
	if want != o {
		return dn.errf("output_spatial_dimensions["+strconv.Itoa(i)+"]", "output spatial dim %d should have size %d (input %d, window %d, stride %d, padding %v), got %d", d.os[i], want, in, kw, s, w.pad[i], o)
	}
	if in == o && kw == 1 {
		f := r.addFactor(o, FactorPassThrough)
		r.mapDim(convX, d.is[i], f)
		r.mapDim(convR, d.os[i], f)
		return nil
	}
	fw := r.addFactor(o, FactorPermutation)
	r.mapDim(convR, d.os[i], fw)
	if kw == 1 {
		r.mapDim(convX, d.is[i], fw)
		return nil
	}
	fk := r.addFactor(kw, FactorReduction)
	r.mapDim(convK, d.ks[i], fk)
	if o >= kw {
		r.mapDim(convX, d.is[i], fw)
		r.mapDim(convX, d.is[i], fk)
	} else {
		r.mapDim(convX, d.is[i], fk)
		r.mapDim(convX, d.is[i], fw)
	}
	return nil
}

// convPadding reads padding as [[lo, hi], ...] or a flat [lo0, hi0, lo1, hi1, ...].
func convPadding(a attrs, spatial int) ([][2]int64, error) {
	out := make([][2]int64, spatial)
	v, ok := a.m["padding"]
	if !ok || v == nil {
		return out, nil
	}
	if rows, ok := v.([]any); ok && len(rows) > 0 {
		if _, nested := rows[0].([]any); nested {
			if len(rows) != spatial {
				return nil, a.errf("padding", "has %d rows but there are %d spatial dims", len(rows), spatial)
			}
			for i, row := range rows {
				pr, ok := row.([]any)
				if !ok || len(pr) != 2 {
					return nil, a.errf("padding["+strconv.Itoa(i)+"]", "must be [low, high]")
				}
				for j := range 2 {
					n, ok := toInt(pr[j])
					if !ok {
						return nil, a.errf("padding["+strconv.Itoa(i)+"]", "must be [low, high] integers")
					}
					out[i][j] = n
				}
			}
			return out, nil
		}
	}
	if rows, ok := v.([][]int64); ok {
		if len(rows) != spatial {
			return nil, a.errf("padding", "has %d rows but there are %d spatial dims", len(rows), spatial)
		}
		for i, row := range rows {
			if len(row) != 2 {
				return nil, a.errf("padding["+strconv.Itoa(i)+"]", "must be [low, high]")
			}
			out[i] = [2]int64{row[0], row[1]}
		}
		return out, nil
	}
	flat, err := a.ints("padding", false)
	if err != nil {
		return nil, err
	}
	if len(flat) != 2*spatial {
		return nil, a.errf("padding", "has %d entries but needs %d ([low, high] per spatial dim)", len(flat), 2*spatial)
	}
	for i := range spatial {
		out[i] = [2]int64{flat[2*i], flat[2*i+1]}
	}
	return out, nil
}
