-- wrk script: POST /v1/reshard with a shape no earlier request used (per-thread id and
-- counter), so every request misses the cache and runs the planner.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local n = 0
function request()
  n = n + 1
  local d0 = 64 + (n * 64 + tid) -- unique per thread and request
  local body = string.format(
    '{"mesh":"x=2,y=4","shape":[%d,2048],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}', d0)
  return wrk.format("POST", nil, nil, body)
end

function done(summary, latency, requests)
  io.write(string.format("non-200: %d\n", summary.errors.status))
end
