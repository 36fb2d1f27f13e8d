// Package cache memoizes encoded plan responses.
//
// A plan request is reduced by the HTTP layer to its canonical bytes; the
// cache key is a prefix, the planner version and the SHA-256 of those bytes,
// and the value is the already-encoded response, so a hit does no planning
// and no re-encoding. The SHA-256 hex alone is the plan id that API.md
// exposes as plan_id and that GET /v1/plans/{plan_id} looks up.
//
// Two [Store] implementations sit behind one interface:
//
//   - [Redis], on a go-redis v9 UniversalClient: a single node, Sentinel or
//     Cluster, chosen from REDIS_URL and the explicit addresses and master
//     name in [Config];
//   - [LRU], an in-process, byte-bounded LRU with TTLs, used when no Redis is
//     configured.
//
// [Cache] wraps a Store for the HTTP layer:
//
//	request ─► Cache.GetOrCompute(key)
//	             │ Store.Get under a short deadline
//	             ├─ hit ──────────────────────────────► bytes, hit
//	             └─ miss or store error ─► one flight per key
//	                                         │ compute once for all waiters,
//	                                         │ on a goroutine of its own
//	                                         ├─► Store.Set before returning
//	                                         │   (context.WithoutCancel, own deadline)
//	                                         └─► bytes, miss
//
// Redis is an optimization, never a dependency of correctness: every store
// error is counted and treated as a miss, a store call never takes longer
// than its deadline ([Config.Timeout]), and the write after a compute delays
// a miss by at most that deadline, so an answer's plan id is readable as soon
// as the answer is out. Concurrent identical misses compute once.
//
// Metrics (registered on the [prometheus.Registerer] given to [New] or
// [Open]):
//
//	shardplan_cache_requests_total{result="hit|miss|error"}
//	shardplan_cache_errors_total{op="get|set|ping"}
//	shardplan_cache_operation_duration_seconds{op="get|set|ping"}
//	shardplan_cache_coalesced_total
//	shardplan_cache_dropped_writes_total
//	shardplan_cache_corrupt_entries_total{reason="format|key|length|checksum"}
//
// Every value a shared store (Redis, and Near's Redis side) holds is a sealed
// entry naming its format, its key and the CRC-32C and length of the payload;
// an entry that does not open is a miss, never served (entry.go). A Cache over
// an *LRU alone keeps the values themselves: the process's own memory.
package cache
