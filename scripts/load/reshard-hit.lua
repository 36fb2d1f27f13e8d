-- wrk script: the same POST /v1/reshard every time, so after the first request every
-- answer is a cache hit. Reports answers that were not 200 or not X-Cache: hit.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"mesh":"x=2,y=4","shape":[2048,2048],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}'

local threads = {}
function setup(thread) table.insert(threads, thread) end

misses = 0 -- per thread (each wrk thread has its own Lua state); summed in done
function response(status, headers, body)
  if status ~= 200 or headers["X-Cache"] ~= "hit" then misses = misses + 1 end
end

function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("misses") end
  io.write(string.format("non-200: %d\nnot a hit: %d\n", summary.errors.status, total))
end
