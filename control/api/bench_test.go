package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// echoLinks answers every create with a link holding its request's URL,
// without validating or storing anything, and a batch allocates only the
// answer's slice (its links are shared: one batch at a time): what is
// measured is what the API itself spends around the write path.
type echoLinks struct{ Links }

var echoed = func() []links.Link {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	ls := make([]links.Link, links.MaxBatch)
	for i := range ls {
		ls[i].Link = link.Link{ID: uint64(1000 + i), Code: fmt.Sprintf("00%04d", i), TenantID: 1, Namespace: "default",
			RedirectType: link.DefaultRedirect, Status: link.Active, Version: uint64(5000 + i), CreatedAt: at, UpdatedAt: at}
	}
	return ls
}()

func (echoLinks) answer(i int, req links.CreateRequest) *links.Link {
	l := &echoed[i]
	if l.URL != req.URL {
		l.URL, l.URLOriginal = req.URL, req.URL // the same URLs come again, run after run
	}
	return l
}

// Create answers a copy, so concurrent creates share nothing.
func (e echoLinks) Create(_ context.Context, _ int64, req links.CreateRequest) (links.Created, error) {
	l := echoed[0]
	l.URL, l.URLOriginal = req.URL, req.URL
	return links.Created{Link: &l}, nil
}

func (e echoLinks) CreateBatch(_ context.Context, _ int64, _ string, reqs []links.CreateRequest) (links.BatchResult, error) {
	out := links.BatchResult{Items: make([]links.ItemResult, len(reqs))}
	for i, r := range reqs {
		out.Items[i].Link = e.answer(i, r)
	}
	return out, nil
}

type oneTenant struct{}

func (oneTenant) Authenticate(context.Context, string) (int64, float64, int, error) {
	return 1, 0, 0, nil
}

// benchBody is a batch of n marketing links, with tracking parameters.
func benchBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"links": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"url": "https://shop.example.com/campaign/spring-sale/%d?utm_source=newsletter&utm_medium=email&utm_campaign=spring&uid=%d"}`, i, 7000000+i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func benchServer() http.Handler {
	return New(oneTenant{}, echoLinks{}, Config{PublicURL: "https://sho.rt", RatePerSecond: -1, Registerer: prometheus.NewRegistry()})
}

func serveBench(b *testing.B, h http.Handler, path string, body []byte, perReq int) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusCreated {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(perReq), "ns/link")
}

// BenchmarkCreateBatchHandler is the API's own work on a batch of 100:
// reading and checking the JSON, answering 100 links.
func BenchmarkCreateBatchHandler(b *testing.B) {
	serveBench(b, benchServer(), "/api/v1/links/batch", benchBody(100), 100)
}

// BenchmarkCreateHandler is the same for one create.
func BenchmarkCreateHandler(b *testing.B) {
	serveBench(b, benchServer(), "/api/v1/links",
		[]byte(`{"url": "https://shop.example.com/campaign/spring-sale/1?utm_source=newsletter&utm_medium=email&utm_campaign=spring&uid=7000001"}`), 1)
}

func BenchmarkDecodeBatch(b *testing.B) {
	body := benchBody(100)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var in batchBody
		req := httptest.NewRequest("POST", "/api/v1/links/batch", bytes.NewReader(body))
		if err := decodeJSON(nil, req, &in, batchShape, MaxBatchBodyBytes, "application/json"); err != nil {
			b.Fatal(err)
		}
	}
}
