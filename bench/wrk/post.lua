-- wrk script for the bench: POSTs WRK_BODY with WRK_AUTH / WRK_HEADERS and prints one JSON
-- line of figures at the end (latency in microseconds). Set by bench/run.ts.
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY")
wrk.headers["Content-Type"] = "application/json"
local extra = os.getenv("WRK_HEADERS") or ""
for name, value in string.gmatch(extra, "([^:\n]+):%s*([^\n]*)") do
  wrk.headers[name] = value
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50":%d,"p75":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f,"stdev":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(75), latency:percentile(90), latency:percentile(99), latency.max, latency.mean, latency.stdev))
end
