#!/usr/bin/env bash
# Load run for the plan cache (docs/PERFORMANCE.md, "Cache and HTTP load").
# Builds the server, starts it on a free loopback port, and runs wrk against
#   GET /healthz (the HTTP floor), cached-hit POST /v1/reshard, uncached POST /v1/reshard
# with the in-process cache, then again with REDIS_URL (if a Redis answers there).
# Usage: scripts/load/run.sh [duration=10s] [threads=2] [connections=32]
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${1:-10s} THREADS=${2:-2} CONNS=${3:-32}
REDIS=${REDIS_URL:-redis://127.0.0.1:6379}
command -v wrk >/dev/null || { echo "wrk not found (apt-get install -y wrk)" >&2; exit 1; }
BIN=$(mktemp -d)/shardplan
go build -o "$BIN" ./cmd/shardplan-server
W="wrk -t$THREADS -c$CONNS -d$DUR --latency"

serve() { # serve ENV...: start the server, set ADDR and PID
  local out; out=$(mktemp)
  env "$@" "$BIN" -addr 127.0.0.1:0 >"$out" 2>/dev/null &
  PID=$!
  for _ in $(seq 100); do ADDR=$(grep -o 'listening on [^ ]*' "$out" | cut -d' ' -f3 || true); [ -n "$ADDR" ] && break; sleep 0.05; done
  [ -n "$ADDR" ] || { echo "server did not start" >&2; exit 1; }
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; }
summary() { grep -E 'Requests/sec|99%|non-2xx|Socket errors|non-200|not a hit' || true; }

run_set() { # run_set LABEL ENV...
  local label=$1; shift
  serve "$@"
  echo "== $label: $W http://$ADDR/healthz"; $W "http://$ADDR/healthz" | summary
  curl -s -o /dev/null -H 'Content-Type: application/json' \
    -d '{"mesh":"x=2,y=4","shape":[2048,2048],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}' "http://$ADDR/v1/reshard"
  echo "== $label: $W -s scripts/load/reshard-hit.lua http://$ADDR/v1/reshard"; $W -s scripts/load/reshard-hit.lua "http://$ADDR/v1/reshard" | summary
  echo "== $label: $W -s scripts/load/reshard-miss.lua http://$ADDR/v1/reshard"; $W -s scripts/load/reshard-miss.lua "http://$ADDR/v1/reshard" | summary
  curl -s "http://$ADDR/metrics" | grep -E '^shardplan_cache_(requests|errors|dropped)' || true
  stop
}

run_set memory SHARDPLAN_LOG_LEVEL=info
if redis-cli -u "$REDIS" ping >/dev/null 2>&1; then
  run_set redis REDIS_URL="$REDIS" SHARDPLAN_CACHE_PREFIX="shardplan-load:$RANDOM$RANDOM:" SHARDPLAN_CACHE_TTL=5m
else
  echo "no Redis at $REDIS; skipped the Redis set"
fi
