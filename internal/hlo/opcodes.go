package hlo

import "strings"

// opcodes are the instruction opcodes XLA prints (hlo_opcode.h), async wrappers and
// their sugared "<op>-start/-update/-done" forms aside.
var opcodes = map[string]bool{}

func init() {
	for _, op := range strings.Fields(`abs add add-dependency after-all all-gather all-gather-done all-gather-start
		all-reduce all-reduce-done all-reduce-start all-to-all and async-done async-start async-update atan2
		batch-norm-grad batch-norm-inference batch-norm-training bitcast bitcast-convert broadcast call cbrt ceil
		cholesky clamp clz collective-broadcast collective-permute collective-permute-done collective-permute-start
		compare complex concatenate conditional constant convert convolution copy copy-done copy-start cosine
		custom-call divide domain dot dynamic-reshape dynamic-slice dynamic-update-slice erf exponential
		exponential-minus-one fft floor fusion gather get-dimension-size get-tuple-element imag infeed iota
		is-finite log log-plus-one logistic map maximum minimum multiply negate not opt-barrier or outfeed pad
		parameter partition-id popcnt power ragged-all-to-all ragged-dot real recv recv-done reduce
		reduce-precision reduce-scatter reduce-window remainder replica-id reshape reverse rng rng-bit-generator
		rng-get-and-update-state round-nearest-afz round-nearest-even rsqrt scaled-dot scatter select
		select-and-scatter send send-done set-dimension-size shift-left shift-right-arithmetic
		shift-right-logical sign sine slice sort sqrt stochastic-convert subtract tan tanh topk transpose
		triangular-solve tuple tuple-select while xor`) {
		opcodes[op] = true
	}
}

// knownOpcode reports whether op is an opcode XLA prints, or the sugared async form of
// one ("reduce-scatter-start", "all-to-all-done").
func knownOpcode(op string) bool {
	if opcodes[op] {
		return true
	}
	base, _ := asyncBase(op)
	return base != "" && opcodes[base]
}

// asyncBase splits a sugared async opcode ("reduce-scatter-start") into the wrapped
// opcode and the phase ("start", "update", "done"); base is "" for other opcodes.
func asyncBase(op string) (base, phase string) {
	for _, ph := range [...]string{"start", "update", "done"} {
		if b, ok := strings.CutSuffix(op, "-"+ph); ok {
			return b, ph
		}
	}
	return "", ""
}
