// Command local runs all of edgelink on one machine for development: a real
// PostgreSQL from the machine's binaries with its data in .data/pg, an
// embedded NATS JetStream server with its store in .data/nats, control and
// one edge, in one process (internal/stack/allinone). `go tool task up`
// runs it. Production runs the control and edge binaries separately against
// external services.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/internal/stack/allinone"
)

func main() {
	var o allinone.Options
	flag.StringVar(&o.DataDir, "data", ".data", "folder for PostgreSQL data, the NATS store and the dev API key")
	flag.StringVar(&o.ControlAddr, "control", "127.0.0.1:8080", "control API address")
	flag.StringVar(&o.EdgeAddr, "edge", "127.0.0.1:8081", "edge address")
	flag.IntVar(&o.NATSPort, "nats-port", 4222, "NATS port (a free one is picked if it is taken)")
	geoip := flag.String("geoip", "", "country data for the edge in Tor's geoip format: a folder holding geoip and geoip6 (go tool task up passes .data/geoip), or files, comma-separated; empty: clicks carry no country")
	flag.Parse()
	if *geoip != "" {
		o.GeoIP = strings.Split(*geoip, ",")
	}
	o.Snapshots = &snapshots.Schedule{}
	o.Stdout = os.Stdout
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := allinone.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "edgelink local:", err)
		os.Exit(1)
	}
}
