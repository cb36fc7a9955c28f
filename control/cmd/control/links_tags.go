package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/internal/atomicfile"
)

type linksTagCmd struct {
	Codes  []string `arg:"" name:"code" help:"The links' codes (up to 1,000)."`
	Add    []string `help:"Tags to add (repeat, or separate with commas)."`
	Remove []string `help:"Tags to remove (repeat, or separate with commas)."`
}

func (c *linksTagCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	if len(c.Add) == 0 && len(c.Remove) == 0 {
		return usageError{errors.New("links tag: give --add or --remove (or both)")}
	}
	cl, err := l.client()
	if err != nil {
		return err
	}
	ls, err := cl.TagLinks(ctx, c.Codes, c.Add, c.Remove)
	if err != nil {
		return fmt.Errorf("links tag: %w", err)
	}
	if l.JSON {
		return printJSON(stdout, map[string]any{"links": ls})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tTAGS")
	for _, li := range ls {
		fmt.Fprintf(tw, "%s\t%s\n", li.Code, strings.Join(li.Tags, ", "))
	}
	return tw.Flush()
}

type linksQRCmd struct {
	Code   string `arg:"" help:"The link's code."`
	Out    string `short:"o" type:"path" help:"File to write (written atomically); - or empty: stdout."`
	Format string `enum:"png,svg" default:"png" help:"png or svg."`
	Size   int    `default:"300" help:"Side in pixels (64-2048)."`
	Margin int    `default:"4" help:"Quiet zone in modules (0-16)."`
	ECC    string `name:"ecc" enum:"L,M,Q,H" default:"M" help:"Error correction: L, M, Q or H (7, 15, 25 or 30% recoverable)."`
}

func (c *linksQRCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer, stderr progressOut) error {
	cl, err := l.client()
	if err != nil {
		return err
	}
	margin := c.Margin
	img, _, err := cl.QR(ctx, c.Code, apiclient.QROptions{Format: c.Format, Size: c.Size, Margin: &margin, ECC: c.ECC})
	if err != nil {
		return fmt.Errorf("links qr %s: %w", c.Code, err)
	}
	if c.Out == "" || c.Out == "-" {
		_, err := stdout.Write(img)
		return err
	}
	if err := atomicfile.Write(c.Out, img); err != nil {
		return fmt.Errorf("links qr %s: %w", c.Code, err)
	}
	fmt.Fprintf(stderr, "wrote %s (%d bytes)\n", c.Out, len(img))
	return nil
}
