package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCount(t *testing.T) {
	cases := []struct {
		n    int
		noun string
		want string
	}{
		{0, "step", "0 steps"},
		{1, "step", "1 step"},
		{2, "collective", "2 collectives"},
		{1, "reshard", "1 reshard"},
		{12, "site", "12 sites"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, Count(tc.n, tc.noun))
		})
	}
}
