-- fencer's Redis fence (fence/redisfence; the Python client runs this same
-- text). Redis runs a script atomically: nothing else runs between the
-- mark's read and its write, so the check and the write are one step.
--
-- KEYS[1] is the scope's mark, a hash {token, seq}; KEYS[2..] are the
-- commands' keys, in order. ARGV: token, seq (0: none), the number of
-- commands, then for each: name, its number of keys, its number of
-- arguments, the arguments. A command's keys come first (SET key value).
--
-- Tokens are uint64 in decimal. Lua's numbers are doubles, exact only to
-- 2^53, so tokens are compared as canonical decimal strings, never numbers.
local MAX = "18446744073709551615"

-- greater(a, b): a > b for canonical decimals (no leading zero).
local function greater(a, b)
	if #a ~= #b then
		return #a > #b
	end
	for i = 1, #a do
		local x, y = string.byte(a, i), string.byte(b, i)
		if x ~= y then
			return x > y
		end
	end
	return false
end

local function canonical(s)
	return type(s) == "string" and string.find(s, "^[0-9]+$") ~= nil
		and (s == "0" or string.sub(s, 1, 1) ~= "0")
		and (#s < 20 or (#s == 20 and not greater(s, MAX)))
end

local token, seq = ARGV[1], ARGV[2]
if not canonical(token) or token == "0" then
	return redis.error_reply("FENCE_MISSING_TOKEN missing or malformed fencing token")
end
if not canonical(seq) then
	return redis.error_reply("FENCE_MALFORMED_SEQUENCE malformed fencing sequence")
end

local mark = redis.call("HMGET", KEYS[1], "token", "seq")
local high, highSeq = mark[1] or "0", mark[2] or "0"
if not canonical(high) or not canonical(highSeq) then
	return redis.error_reply("FENCE_CORRUPT_MARK " .. KEYS[1] .. " is not a fencer mark")
end

-- fence.Mark.Admits: a greater token, or the same token with a greater
-- sequence (never sequence 0, so an equal token without one is a replay).
local admitted = greater(token, high) or (token == high and seq ~= "0" and greater(seq, highSeq))
if not admitted then
	return {0, high, highSeq}
end

-- Decode every command before anything is written.
local cmds, pos, nextKey = {}, 4, 2
local n = tonumber(ARGV[3])
for i = 1, n do
	local nkeys, nargs = tonumber(ARGV[pos + 1]), tonumber(ARGV[pos + 2])
	local call = {ARGV[pos]}
	for k = 1, nkeys do
		call[#call + 1] = KEYS[nextKey]
		nextKey = nextKey + 1
	end
	pos = pos + 3
	for a = 1, nargs do
		call[#call + 1] = ARGV[pos]
		pos = pos + 1
	end
	cmds[i] = call
end
if nextKey ~= #KEYS + 1 or pos ~= #ARGV + 1 then
	return redis.error_reply("FENCE_BAD_REQUEST commands do not match their keys and arguments")
end

-- Redis does not roll a script back: a command that fails (WRONGTYPE, a
-- syntax error) leaves the ones before it applied. So every key is saved
-- (DUMP and its TTL) before the first command runs, and put back as it was
-- if one fails; the mark is written last, only when all succeeded.
local saved, seen = {}, {}
for k = 2, #KEYS do
	local key = KEYS[k]
	if not seen[key] then
		seen[key] = true
		saved[#saved + 1] = {key, redis.call("DUMP", key), redis.call("PTTL", key)}
	end
end

local replies = {}
for i, call in ipairs(cmds) do
	local r = redis.pcall(unpack(call))
	if type(r) == "table" and r.err then
		for _, s in ipairs(saved) do
			if s[2] then
				local ttl = s[3]
				if ttl < 0 then
					ttl = 0 -- no expiry
				elseif ttl == 0 then
					ttl = 1 -- expiring now: 0 would mean never
				end
				redis.call("RESTORE", s[1], ttl, s[2], "REPLACE")
			else
				redis.call("DEL", s[1])
			end
		end
		return redis.error_reply("FENCE_COMMAND_FAILED " .. i .. " " .. r.err)
	end
	replies[i] = r
end

redis.call("HSET", KEYS[1], "token", token, "seq", seq)
return {1, replies}
