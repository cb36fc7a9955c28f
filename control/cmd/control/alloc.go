package main

import (
	"context"
	"fmt"
	"io"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/postgres"
)

type allocVerifyCmd struct{ database }

func (allocVerifyCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return runAllocVerify(ctx, g.DatabaseURL, stdout)
}

// runAllocVerify is `control alloc verify`: it checks the allocation audit on
// the database at dsn (point it at the primary, or at a promotion candidate
// before trusting it) and prints the result to stdout. It returns an error,
// so the command exits non-zero, when any audited intervals overlap, lie
// outside their namespace, or end above their namespace's counter; every
// offending interval is named on stdout.
func runAllocVerify(ctx context.Context, dsn string, stdout io.Writer) error {
	pool, err := postgres.Open(ctx, dsn, 0)
	if err != nil {
		return fmt.Errorf("alloc verify: %w", err)
	}
	defer pool.Close()
	rep, err := allocstore.New(pool).Verify(ctx)
	if err != nil {
		return fmt.Errorf("alloc verify: %w", err)
	}
	if rep.OK() {
		fmt.Fprintf(stdout, "ok: %d audited intervals in %d namespaces are pairwise disjoint, inside their namespaces and below their counters\n",
			rep.Intervals, rep.Namespaces)
		return nil
	}
	for _, v := range rep.Violations {
		fmt.Fprintln(stdout, "VIOLATION", v)
	}
	return fmt.Errorf("alloc verify: %d violations in %d audited intervals (listed above): do not allocate until the authority is repaired",
		len(rep.Violations), rep.Intervals)
}
