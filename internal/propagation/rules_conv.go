package propagation

import (
	"strconv"
)

func convRule(a attrs, x, k, res []int64) (*Rule, error) {
	dn := a.sub("dimension_numbers")
	n := len(x)
	if len(k) != n || len(res) != n || n < 2 {
		return nil, a.errf("", "input, kernel and result must share a rank >= 2, got %d, %d and %d", n, len(k), len(res))
	}
	one := func(name string, rank int) (int, error) {
		v, err := dn.int(name, -1)
		if err != nil {
			return 0, err
		}
		if v < 0 || v >= int64(rank) {
			return 0, dn.errf(name, "is required and must be a dim in 0..%d", rank-1)
		}
		return int(v), nil
	}
	var err error
	var ib, ifeat, kin, kout, ob, of int
	if ib, err = one("input_batch_dimension", n); err != nil {
		return nil, err
	}
	if ifeat, err = one("input_feature_dimension", n); err != nil {
		return nil, err
	}
	if kin, err = one("kernel_input_feature_dimension", n); err != nil {
		return nil, err
	}
	if kout, err = one("kernel_output_feature_dimension", n); err != nil {
		return nil, err
	}
	if ob, err = one("output_batch_dimension", n); err != nil {
		return nil, err
	}
	if of, err = one("output_feature_dimension", n); err != nil {
		return nil, err
	}
	is, err := dn.dimList("input_spatial_dimensions", n, true)
	if err != nil {
		return nil, err
	}
	ks, err := dn.dimList("kernel_spatial_dimensions", n, true)
	if err != nil {
		return nil, err
	}
	os, err := dn.dimList("output_spatial_dimensions", n, true)
	if err != nil {
		return nil, err
	}
	if len(is) != n-2 || len(ks) != n-2 || len(os) != n-2 {
		return nil, dn.errf("input_spatial_dimensions", "input, kernel and output need %d spatial dims each", n-2)
	}
	distinct := func(name string, ds ...int) error {
		seen := map[int]bool{}
		for _, d := range ds {
			if seen[d] {
				return dn.errf(name, "dim %d is used twice", d)
			}
			seen[d] = true
		}
		return nil
	}
	if err := distinct("input_spatial_dimensions", append([]int{ib, ifeat}, is...)...); err != nil {
		return nil, err
	}
	if err := distinct("kernel_spatial_dimensions", append([]int{kin, kout}, ks...)...); err != nil {
		return nil, err
	}
	if err := distinct("output_spatial_dimensions", append([]int{ob, of}, os...)...); err != nil {
		return nil, err
	}
	fgc, err := a.int("feature_group_count", 1)
	if err != nil {
		return nil, err
	}
	bgc, err := a.int("batch_group_count", 1)
	if err != nil {
		return nil, err
	}
	if fgc < 1 || bgc < 1 {
		return nil, a.errf("feature_group_count", "group counts must be >= 1")
	}
	if k[kin]*fgc != x[ifeat] {
		return nil, dn.errf("kernel_input_feature_dimension", "kernel input features (%d) x feature_group_count (%d) must equal input features (%d)", k[kin], fgc, x[ifeat])
	}
	if res[of] != k[kout] {
		return nil, dn.errf("output_feature_dimension", "output features (%d) must equal kernel output features (%d)", res[of], k[kout])
	}
	if res[ob]*bgc != x[ib] {
		return nil, dn.errf("output_batch_dimension", "output batch (%d) x batch_group_count (%d) must equal input batch (%d)", res[ob], bgc, x[ib])
	}
	strides, err := a.ints("window_strides", false)
	if err != nil {
		return nil, err
	}
	lhsDil, err := a.ints("lhs_dilation", false)
	if err != nil {
		return nil, err
	}
	rhsDil, err := a.ints("rhs_dilation", false)
	if err != nil {
		return nil, err
	}
	pad, err := convPadding(a, n-2)
	if err != nil {
		return nil, err
	}
	at := func(xs []int64, i int) int64 {
		if i < len(xs) && xs[i] > 0 {
			return xs[i]
		}
		return 1
	}
	r := newRule([]int{n, n}, []int{n})
	const xT, kT, rT = 0, 1, 2
	if x[ib] == res[ob] {
		f := r.addFactor(res[ob], FactorPassThrough)
		r.mapDim(xT, ib, f)
		r.mapDim(rT, ob, f)
	} else {
		r.mapDim(xT, ib, r.addFactor(x[ib], FactorNeedReplication))
		r.mapDim(rT, ob, r.addFactor(res[ob], FactorNeedReplication))
	}
	fo := r.addFactor(res[of], FactorPassThrough)
	r.mapDim(kT, kout, fo)
	r.mapDim(rT, of, fo)
	if fgc == 1 {
		f := r.addFactor(x[ifeat], FactorReduction)
		r.mapDim(xT, ifeat, f)
		r.mapDim(kT, kin, f)
	} else {
		r.mapDim(xT, ifeat, r.addFactor(x[ifeat], FactorNeedReplication))
		r.mapDim(kT, kin, r.addFactor(k[kin], FactorNeedReplication))
	}
	for i := range n - 2 {
		in, kw, o := x[is[i]], k[ks[i]], res[os[i]]
		s := at(strides, i)
		dilIn := (in-1)*at(lhsDil, i) + 1
		dilK := (kw-1)*at(rhsDil, i) + 1
		span := dilIn + pad[i][0] + pad[i][1] - dilK
		want := int64(0)
		if in > 0 && span >= 0 {
			want = span/s + 1
		}
		if want != o {
			return nil, dn.errf("output_spatial_dimensions["+strconv.Itoa(i)+"]", "output spatial dim %d should have size %d (input %d, window %d, stride %d, padding %v), got %d", os[i], want, in, kw, s, pad[i], o)
		}
		if in == o && kw == 1 {
			f := r.addFactor(o, FactorPassThrough)
			r.mapDim(xT, is[i], f)
			r.mapDim(rT, os[i], f)
			continue
		}
		fw := r.addFactor(o, FactorPermutation)
		r.mapDim(rT, os[i], fw)
		if kw == 1 {
			r.mapDim(xT, is[i], fw)
			continue
		}
		fk := r.addFactor(kw, FactorReduction)
		r.mapDim(kT, ks[i], fk)
		if o >= kw {
			r.mapDim(xT, is[i], fw)
			r.mapDim(xT, is[i], fk)
		} else {
			r.mapDim(xT, is[i], fk)
			r.mapDim(xT, is[i], fw)
		}
	}
	return r.finish(), nil
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
