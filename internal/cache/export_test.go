package cache

import (
	"crypto/sha256"
	"encoding/hex"
)

// PlanID returns the plan id of a canonical request as api computes it: the lowercase
// hex SHA-256 of its bytes.
func PlanID(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// SharedRedis is sharedRedis for the external test package (cache_test).
var SharedRedis = sharedRedis
