package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/edgelink/edgelink/control/apiclient"
)

type linksListCmd struct {
	Status        string   `help:"Only links in this state (e.g. active, disabled, deleted; the API's status filter, docs/api.md); default: active and disabled."`
	Namespace     string   `help:"Only links of this ID namespace."`
	CreatedAfter  string   `name:"created-after" placeholder:"TIME" help:"Only links created after TIME (RFC 3339, e.g. 2030-01-02T15:04:05Z)."`
	CreatedBefore string   `name:"created-before" placeholder:"TIME" help:"Only links created before TIME (RFC 3339)."`
	Limit         int      `default:"50" help:"Links per page (1-200)."`
	Cursor        string   `help:"Start at this page: the cursor a previous list printed."`
	All           bool     `help:"Follow the pages to the last one."`
	Tags          []string `name:"tag" help:"Only links with this tag (repeat, or separate with commas)."`
	TagMode       string   `name:"tag-mode" enum:"any,all" default:"any" help:"With several --tag: links with any of them, or all."`
	Search        string   `name:"search" short:"q" help:"Only links whose code starts with it, whose target's host is it or a subdomain of it, or whose title holds it."`
}

func (c *linksListCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	cl, err := l.client()
	if err != nil {
		return err
	}
	q := apiclient.ListRequest{Status: c.Status, Namespace: c.Namespace, CreatedAfter: c.CreatedAfter,
		CreatedBefore: c.CreatedBefore, Limit: c.Limit, Cursor: c.Cursor, Tags: c.Tags, Search: c.Search}
	if len(c.Tags) > 0 {
		q.TagMode = c.TagMode
	}
	out := listPrinter{w: stdout, json: l.JSON}
	for {
		p, err := cl.List(ctx, q)
		if err != nil {
			return fmt.Errorf("links list: %w", err)
		}
		next := ""
		if p.NextCursor != nil {
			next = *p.NextCursor
		}
		last := next == "" || !c.All
		if err := out.page(p.Links, next, last); err != nil {
			return err
		}
		if last {
			return nil
		}
		q.Cursor = next
	}
}

// listPrinter writes the pages of a list as they arrive, so --all needs no
// memory for the whole list: with --json one object, {"links": [...],
// "next_cursor": ...}, as the API answers a page; else a table per page
// and, when more pages follow, the cursor to ask for the next.
type listPrinter struct {
	w     io.Writer
	json  bool
	count int
}

func (p *listPrinter) page(ls []apiclient.Link, next string, last bool) error {
	if p.json {
		return p.pageJSON(ls, next, last)
	}
	if len(ls) > 0 {
		tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
		if p.count == 0 {
			fmt.Fprintln(tw, "CODE\tDOMAIN\tSTATUS\tTYPE\tEXPIRES\tCREATED\tURL")
		}
		for _, l := range ls {
			expires := "never"
			if l.ExpiresAt != nil {
				expires = *l.ExpiresAt
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.Code, l.Domain, l.Status, l.RedirectType, expires, l.CreatedAt, l.URL)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	p.count += len(ls)
	if !last {
		return nil
	}
	switch {
	case p.count == 0:
		fmt.Fprintln(p.w, "no links")
	case next != "":
		fmt.Fprintf(p.w, "more: control links list --cursor %s (or --all)\n", next)
	}
	return nil
}

func (p *listPrinter) pageJSON(ls []apiclient.Link, next string, last bool) error {
	if p.count == 0 {
		fmt.Fprint(p.w, "{\"links\": [")
	}
	for _, l := range ls {
		b, err := marshalPlain(l)
		if err != nil {
			return err
		}
		sep := ",\n  "
		if p.count == 0 {
			sep = "\n  "
		}
		fmt.Fprintf(p.w, "%s%s", sep, b)
		p.count++
	}
	if !last {
		return nil
	}
	cursor := "null"
	if next != "" {
		b, _ := marshalPlain(next)
		cursor = string(b)
	}
	if p.count > 0 {
		fmt.Fprint(p.w, "\n")
	}
	_, err := fmt.Fprintf(p.w, "], \"next_cursor\": %s}\n", cursor)
	return err
}

// marshalPlain is json.Marshal leaving '&', '<' and '>' as they are (URLs
// stay readable), without the trailing newline.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
