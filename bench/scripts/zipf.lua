-- Requests keyed by user for wrk, for consistent hashing on a header: each
-- request carries HEADER: user-K, K drawn from a Zipf distribution over
-- USERS users with exponent S (user k with weight 1/k^S: a few hot users
-- and a long tail, as real keys are). Each thread draws its own sequence
-- from a fixed seed, so runs send the same keys in the same order.
--   wrk -s zipf.lua URL -- USERS S HEADER
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

init = function(args)
  local users = tonumber(args[1]) or 10000
  local s = tonumber(args[2]) or 1.1
  local header = args[3] or "X-User"
  math.randomseed(7919 * (id or 1))
  -- cdf[k] is the probability of a user among 1..k; reqs[k] is user k's
  -- request, made once.
  cdf, reqs, n = {}, {}, users
  local sum = 0
  for k = 1, users do
    sum = sum + 1 / k ^ s
    cdf[k] = sum
  end
  for k = 1, users do
    cdf[k] = cdf[k] / sum
    local h = {}
    for name, value in pairs(wrk.headers) do
      h[name] = value
    end
    h[header] = "user-" .. k
    reqs[k] = wrk.format(nil, nil, h)
  end
end

request = function()
  local u = math.random()
  local lo, hi = 1, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return reqs[lo]
end
