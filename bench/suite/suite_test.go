package main

import "testing"

func TestParseWrk(t *testing.T) {
	out := []byte(`Running 4s test @ http://127.0.0.1:40000
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms  310.00us   9.00ms   90.00%
    Req/Sec    52.10k     2.00k   55.00k    80.00%
  207400 requests in 4.00s, 30.10MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 20740
Requests/sec:  51850.12
Transfer/sec:      7.52MB
`)
	got, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Requests: 207400, RPS: 51850.12, Non3xx: 20740, Errors: 3}
	if got != want {
		t.Errorf("parseWrk = %+v, want %+v", got, want)
	}
	if _, err := parseWrk([]byte("wrk: connection refused")); err == nil {
		t.Error("parseWrk of an error message succeeded")
	}
}
