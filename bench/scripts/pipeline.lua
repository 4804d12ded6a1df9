-- HTTP/1.1 pipelining for wrk: each write carries DEPTH requests (the first
-- script argument, default 10); wrk counts every response.
--   wrk -s pipeline.lua URL -- DEPTH
local depth = 10

init = function(args)
  depth = tonumber(args[1]) or depth
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format()
  end
  req = table.concat(r)
end

request = function()
  return req
end
