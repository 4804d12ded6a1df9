-- POST bodies for wrk: SIZE bytes (the first script argument), sent with a
-- Content-Length, or with Transfer-Encoding: chunked in 16 KiB chunks when
-- the second argument is "chunked" (wrk.format would add a Content-Length
-- beside it, which proxies rightly refuse, so that request is built here).
--   wrk -s upload.lua URL -- SIZE [chunked]
init = function(args)
  local size = tonumber(args[1]) or 65536
  local ctype = "application/octet-stream"
  if args[2] ~= "chunked" then
    req = wrk.format("POST", nil, {["Content-Type"] = ctype}, string.rep("x", size))
    return
  end
  local parts = {}
  local chunk = 16384
  local left = size
  while left > 0 do
    local n = math.min(chunk, left)
    parts[#parts + 1] = string.format("%x\r\n", n) .. string.rep("x", n) .. "\r\n"
    left = left - n
  end
  parts[#parts + 1] = "0\r\n\r\n"
  local head = {"POST " .. wrk.path .. " HTTP/1.1", "Host: " .. wrk.headers["Host"],
    "Content-Type: " .. ctype, "Transfer-Encoding: chunked"}
  for k, v in pairs(wrk.headers) do
    if k ~= "Host" then
      head[#head + 1] = k .. ": " .. v
    end
  end
  req = table.concat(head, "\r\n") .. "\r\n\r\n" .. table.concat(parts)
end

request = function()
  return req
end
