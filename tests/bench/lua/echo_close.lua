-- echo, then close: the server closes first, so TIME_WAIT lands on the server's side
-- (tests/bench/tuning.sh, the "server closes first" runs)
return {on_data = function(conn, frame)
    conn:send(frame)
    return false
end}
