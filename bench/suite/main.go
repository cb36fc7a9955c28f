// Command suite is edgelink's side-by-side load benchmark. It starts the
// real stack (PostgreSQL, NATS JetStream, control, and the edge binary as
// its own process) on loopback, loads N links through control's batch API,
// starts every baseline itself with the same links (a bare fasthttp
// constant 302, nginx with a map, fasthttp with one Redis GET per request,
// net/http with a Go map), runs the scenarios with wrk and a paced open-loop
// generator of its own (pace.go), and
// writes bench/results/<date>-<commit>.md with PNG charts. Every process it
// starts runs in its own process group and is stopped on exit, on error and
// on SIGINT.
//
//	go tool task bench                    # the short suite (under 10 minutes)
//	go tool task soak                     # 10 minutes of load, memory over time
//	go run ./bench/suite -links 100000 -rounds 1 -duration 2s   # a smoke run
//
// Internal subcommands: `serve KIND` runs a baseline server, `attack` runs
// the paced generator at a fixed rate in its own (pinnable) process;
// `clickgen`, `clickroll` and `clickraw` are the clicks scenario's
// processes (clickcmd.go).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var err error
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve":
			err = serve(os.Args[2:])
		case "attack":
			err = attack(os.Args[2:])
		case "clickgen", "clickroll", "clickraw":
			err = clickCommand(os.Args[1], os.Args[2:])
		default:
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			err = run(ctx, os.Args[1:])
			stop()
		}
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = run(ctx, nil)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
