package propagation

// reshapeRule factorises a reshape from shape in to shape out (equal, non-zero element
// counts), following Shardy's builder: walk both shapes keeping the running product of
// the factors given to each side. In sync, the gcd of the unfactored parts of the
// current dims becomes a shared factor (or, when it is 1, each side gets a private
// factor); out of sync, the lagging side gets a private factor that re-syncs the products
// when it can. Size-1 dims get their own size-1 factor.
func reshapeRule(in, out []int64) *Rule {
	r := newRule([]int{len(in)}, []int{len(out)})
	const inT, outT = 0, 1
	ii, oi := 0, 0
	var inRem, outRem int64 = 1, 1
	var inProd, outProd int64 = 1, 1
	// advance moves a side to its next dim with something left to factor, giving size-1
	// dims their own factor on the way.
	advance := func(t int, shape []int64, i *int, rem *int64) {
		for *rem == 1 && *i < len(shape) {
			if shape[*i] == 1 {
				r.mapDim(t, *i, r.addFactor(1, FactorPassThrough))
				*i++
				continue
			}
			*rem = shape[*i]
			break
		}
	}
	advance(inT, in, &ii, &inRem)
	advance(outT, out, &oi, &outRem)
	for ii < len(in) || oi < len(out) {
		switch {
		case ii == len(in): // only with unequal element counts; never for a valid reshape
			r.mapDim(outT, oi, r.addFactor(outRem, FactorPassThrough))
			outRem = 1
		case oi == len(out):
			r.mapDim(inT, ii, r.addFactor(inRem, FactorPassThrough))
			inRem = 1
		case inProd == outProd:
			if g := gcd(inRem, outRem); g > 1 {
				f := r.addFactor(g, FactorPassThrough)
				r.mapDim(inT, ii, f)
				r.mapDim(outT, oi, f)
				inRem, outRem = inRem/g, outRem/g
				inProd, outProd = inProd*g, outProd*g
			} else {
				r.mapDim(inT, ii, r.addFactor(inRem, FactorPassThrough))
				r.mapDim(outT, oi, r.addFactor(outRem, FactorPassThrough))
				inProd, outProd = inProd*inRem, outProd*outRem
				inRem, outRem = 1, 1
			}
		case inProd < outProd:
			s := lagSize(inRem, outRem, inProd, outProd)
			r.mapDim(inT, ii, r.addFactor(s, FactorPassThrough))
			inRem /= s
			inProd *= s
		default:
			s := lagSize(outRem, inRem, outProd, inProd)
			r.mapDim(outT, oi, r.addFactor(s, FactorPassThrough))
			outRem /= s
			outProd *= s
		}
		if inRem == 1 && ii < len(in) {
			ii++
			advance(inT, in, &ii, &inRem)
		}
		if outRem == 1 && oi < len(out) {
			oi++
			advance(outT, out, &oi, &outRem)
		}
	}
	return r.finish()
}

// lagSize is the size of the private factor the lagging side (remaining part rem,
// product prod < other) emits.
func lagSize(rem, otherRem, prod, otherProd int64) int64 {
	if otherProd%prod == 0 {
		if ratio := otherProd / prod; rem%ratio == 0 {
			return ratio
		}
	}
	if g := gcd(rem, otherRem); rem > g {
		return rem / g
	}
	return rem
}
