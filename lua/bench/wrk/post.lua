-- post.lua (wrk's example, rewritten for lfbench): a POST with a body, set once in the wrk
-- table: the method, the body (wrk.format() adds its Content-Length) and a Content-Type header.
-- No request() is needed: the request is wrk.format() of the table.
--
--   lfbench --expect http --script lua/bench/wrk/post.lua 127.0.0.1:8080

wrk.method = "POST"
wrk.body = "foo=bar&baz=quux"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
