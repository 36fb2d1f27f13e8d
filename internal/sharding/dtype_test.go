package sharding_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardplan/shardplan/internal/sharding"
)

func TestDTypeBits(t *testing.T) {
	cases := []struct {
		name string
		bits int
		ok   bool
	}{
		{"f32", 32, true}, {"bf16", 16, true}, {"pred", 8, true},
		{"float32", 32, true}, {"bfloat16", 16, true}, {"float16", 16, true}, {"float64", 64, true},
		{"int8", 8, true}, {"uint8", 8, true}, {"int32", 32, true}, {"bool", 8, true},
		{"torch.float16", 16, true}, {"torch.bfloat16", 16, true}, {"torch.float", 32, true},
		{"torch.half", 16, true}, {"torch.long", 64, true}, {"torch.bool", 8, true},
		{"jnp.float32", 32, true}, {"np.float32", 32, true}, {"jax.numpy.bfloat16", 16, true},
		{"numpy.int4", 4, true}, {"dtype('float32')", 32, true}, {" float8_e4m3fn ", 8, true},
		{"float", 0, false}, {"np.float", 0, false}, {"int", 0, false}, {"torch.", 0, false},
		{"Float32", 0, false}, {"", 0, false},
	}
	for _, tc := range cases {
		b, ok := sharding.DTypeBits(tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
		assert.Equal(t, tc.bits, b, tc.name)
	}
}
