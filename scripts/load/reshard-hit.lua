-- wrk script: the same POST /v1/reshard every time, so after the first request every
-- answer is a cache hit (X-Cache: hit). Non-200 answers are counted and reported.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"mesh":"x=2,y=4","shape":[2048,2048],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}'

local misses, bad = 0, 0
function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
  if headers["X-Cache"] ~= "hit" then misses = misses + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("non-200: %d\n", summary.errors.status))
end
