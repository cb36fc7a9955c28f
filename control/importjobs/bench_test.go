package importjobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
)

// BenchmarkImport1000 imports a 1,000-row export through the in-process
// Client (the console's way) and through the creator API over loopback
// HTTP (the CLI's way), on the same database, in batches of BatchSize
// with 2 in flight: what the HTTP hop the console avoids costs. Each
// iteration imports new codes.
//
//	go test -run '^$' -bench Import1000 -benchtime 10x ./control/importjobs
func BenchmarkImport1000(b *testing.B) {
	e := newEnv(b)
	srv := httptest.NewServer(api.New(e.st, e.svc, api.Config{PublicURL: "https://sho.rt", RatePerSecond: -1}))
	b.Cleanup(srv.Close)
	runs := 0
	for _, way := range []string{"in-process", "http"} {
		b.Run(way, func(b *testing.B) {
			runs++
			tenant, key, err := e.st.CreateTenantWithKey(context.Background(), fmt.Sprintf("bench-%s-%d", way, runs))
			if err != nil {
				b.Fatal(err)
			}
			var client importer.Client = importjobs.NewClient(e.svc, tenant, e.short, nil)
			if way == "http" {
				if client, err = apiclient.New(srv.URL, key); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				file := csvRows(fmt.Sprintf("%s%d-%d", way[:2], runs, i), 1000)
				rd, err := importer.NewReader(bytes.NewReader(file), importer.Auto)
				if err != nil {
					b.Fatal(err)
				}
				sum := sha256.Sum256(file)
				s, err := importer.Run(context.Background(), rd, client, importer.Options{Digest: hex.EncodeToString(sum[:]), BatchSize: importjobs.BatchSize, Concurrency: 2})
				if err != nil || s.Kept != 1000 {
					b.Fatalf("%v %+v", err, s)
				}
			}
		})
	}
}
