//go:build !race

package api

// raceBuild is true under -race: the heaviest transfer cases run one of their
// variants.
const raceBuild = false
