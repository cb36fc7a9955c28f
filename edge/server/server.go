// Package server wires an edge: the store, the change feed and the fasthttp
// redirect server. The edge binary and the local all-in-one mode run it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/store"
)

// Config is everything an edge needs to run.
type Config struct {
	HTTPAddr string
	NATSURL  string
	Name     string // identifies the edge in NATS and logs
	Log      *slog.Logger
	// OnListen, if set, is called with the server's address once it listens.
	OnListen func(addr net.Addr)
}

// Run serves until ctx is done. The edge keeps answering from memory while
// NATS is unreachable; readiness reports it.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("edgelink-edge "+cfg.Name), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	st := store.New()
	feed := changefeed.New(js, st, log)
	h := &redirect.Handler{Store: st, Ready: func() error {
		p := feed.Position()
		switch {
		case !nc.IsConnected():
			return errors.New("degraded: change stream unreachable; serving known links")
		case !p.CaughtUp:
			return fmt.Errorf("catching up: %d changes pending", p.Pending)
		}
		return nil
	}}
	srv := &fasthttp.Server{
		Handler:               h.Serve,
		Name:                  "edgelink",
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		IdleTimeout:           60 * time.Second,
		ReadBufferSize:        8 << 10, // bounds the request line and headers
		MaxRequestBodySize:    4 << 10,
		DisableKeepalive:      false,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		NoDefaultDate:         false,
		CloseOnShutdown:       true,
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}
	log.Info("edge listening", "addr", ln.Addr().String())

	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	g := new(errgroup.Group)
	g.Go(func() error { return feed.Run(feedCtx) })
	g.Go(func() error { return srv.Serve(ln) })
	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.ShutdownWithContext(shutdownCtx)
	stopFeed()
	return errors.Join(err, g.Wait())
}
