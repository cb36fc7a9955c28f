package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/internal/atomicfile"
)

type importCmd struct {
	apiFlags
	Files        []string `arg:"" type:"existingfile" help:"Export files (Bitly CSV/JSON, YOURLS CSV/JSON, Shlink CSV/JSON, or a CSV of your own with a url column)."`
	Format       string   `default:"auto" enum:"auto,csv,bitly,yourls,shlink" help:"Source system, or csv for a CSV of your own (docs/cli.md); auto tells it from the header (CSV) or the first object (JSON)."`
	Mapping      string   `type:"path" help:"Where to write the old code -> new code mapping (CSV; default FILE.mapping.csv). One file only."`
	Rejects      string   `type:"path" help:"Where to write the rows not imported, with reasons (CSV; default FILE.rejects.csv). One file only."`
	BatchSize    int      `name:"batch-size" default:"1000" hidden:"" help:"Links per batch request (1-1000). Hidden: a re-run must use the same value, or rows re-coded by the first run are created again."`
	Concurrency  int      `default:"4" help:"Batch requests in flight."`
	Namespace    string   `help:"ID namespace of the imported links (default: the API's default)."`
	RedirectType int      `name:"redirect-type" help:"Redirect status of the imported links: 301, 302 (default), 307 or 308."`
	// A Shlink export names its own default domain in every row; those
	// rows belong on the platform's domain here, not on a domain of that
	// name.
	DefaultDomains []string `name:"default-domain" help:"The export's own default host (repeatable): its rows go on the platform's domain. Shlink exports name it in every row."`
}

func (c *importCmd) Run(ctx context.Context, stdout io.Writer, progress progressOut) error {
	return runImport(ctx, *c, stdout, progress.Writer)
}

// runImport is `control import`: every file in turn, each with its own
// mapping and rejects files and summary. A file whose chunks all went
// through is done even if some rows were rejected (they are in the rejects
// file); chunks that failed make the command fail, and running it again
// finishes the job without duplicates.
func runImport(ctx context.Context, c importCmd, stdout, stderr io.Writer) error {
	if len(c.Files) > 1 && (c.Mapping != "" || c.Rejects != "") {
		return usageError{errors.New("import: --mapping and --rejects name one file's outputs: import several files without them (each gets FILE.mapping.csv and FILE.rejects.csv)")}
	}
	if c.BatchSize < 1 || c.BatchSize > 1000 {
		return usageError{fmt.Errorf("import: --batch-size must be 1 to 1000, not %d", c.BatchSize)}
	}
	format, err := importer.ParseFormat(c.Format)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	cl.Attempts = 10 // batches are idempotent: ride out a control restart
	var errs []error
	for _, file := range c.Files {
		if err := importFile(ctx, c, format, cl, file, stdout, stderr); err != nil {
			errs = append(errs, fmt.Errorf("import %s: %w", file, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

func importFile(ctx context.Context, c importCmd, format importer.Format, cl importer.Client, file string, stdout, stderr io.Writer) error {
	digest, size, err := fileDigest(file)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := importer.NewReader(f, format)
	if err != nil {
		return err
	}
	if ig := rd.Ignored(); len(ig) > 0 {
		fmt.Fprintf(stderr, "import %s: columns not read (the %s format has no such column): %s\n", file, rd.Format(), strings.Join(ig, ", "))
	}
	mapping, rejects := c.Mapping, c.Rejects
	if mapping == "" {
		mapping = file + ".mapping.csv"
	}
	if rejects == "" {
		rejects = file + ".rejects.csv"
	}
	prog := newProgressLine(stderr, file)
	s, runErr := importer.Run(ctx, rd, cl, importer.Options{
		Digest: digest, BatchSize: c.BatchSize, Concurrency: c.Concurrency,
		Namespace: c.Namespace, RedirectType: c.RedirectType, DefaultDomains: c.DefaultDomains,
		Progress: prog.update, BytesTotal: size,
	})
	prog.finish()
	if s == nil {
		return runErr
	}
	if err := writeOutcomes(mapping, rejects, s); err != nil {
		return errors.Join(runErr, err)
	}
	if c.JSON {
		if err := printJSON(stdout, importJSON(file, rd.Encoding(), mapping, rejects, s)); err != nil {
			return err
		}
	} else {
		printSummary(stdout, file, rd.Encoding(), mapping, rejects, s)
	}
	return runErr
}

// fileDigest is the SHA-256 of the file's content: the import's identity
// in its idempotency keys.
func fileDigest(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func writeOutcomes(mapping, rejects string, s *importer.Summary) error {
	var mb, rb bytes.Buffer
	if err := s.WriteMapping(&mb); err != nil {
		return fmt.Errorf("write mapping: %w", err)
	}
	if err := s.WriteRejects(&rb); err != nil {
		return fmt.Errorf("write rejects: %w", err)
	}
	if err := atomicfile.Write(mapping, mb.Bytes()); err != nil {
		return fmt.Errorf("write mapping: %w", err)
	}
	if err := atomicfile.Write(rejects, rb.Bytes()); err != nil {
		return fmt.Errorf("write rejects: %w", err)
	}
	return nil
}

func printSummary(w io.Writer, file, encoding, mapping, rejects string, s *importer.Summary) {
	fmt.Fprintf(w, "import of %s (%s, %s): %s rows\n", file, s.Format, encoding, thousands(s.Rows))
	fmt.Fprintf(w, "  imported    %s (kept code %s, already present %s, re-coded %s)\n",
		thousands(s.Imported()), thousands(s.Kept), thousands(s.Existing), thousands(s.Recoded))
	fmt.Fprintf(w, "  duplicates  %s (same code and URL as an earlier row)\n", thousands(s.Dups))
	fmt.Fprintf(w, "  rejected    %s\n", thousands(s.Rejected))
	reasons := map[string]int{}
	var order []string
	for _, o := range s.Outcomes {
		if o.Kind == importer.Rejected {
			r := o.Reason
			if len(r) > 90 {
				r = r[:90] + "…"
			}
			if reasons[r] == 0 {
				order = append(order, r)
			}
			reasons[r]++
		}
	}
	for i, r := range order {
		if i == 10 {
			fmt.Fprintf(w, "    … %d more reasons\n", len(order)-10)
			break
		}
		fmt.Fprintf(w, "    %6d  %s\n", reasons[r], r)
	}
	fmt.Fprintf(w, "  batches     %d (%d replayed from an earlier run, %d failed)\n", s.Chunks, s.Replayed, s.Failed)
	fmt.Fprintf(w, "  mapping     %s\n  rejects     %s\n", mapping, rejects)
}

func importJSON(file, encoding, mapping, rejects string, s *importer.Summary) any {
	return map[string]any{
		"file": file, "format": s.Format, "encoding": encoding, "rows": s.Rows,
		"imported": s.Imported(), "kept": s.Kept, "existing": s.Existing, "recoded": s.Recoded,
		"duplicates": s.Dups, "rejected": s.Rejected,
		"batches": s.Chunks, "replayed": s.Replayed, "failed": s.Failed,
		"mapping_file": mapping, "rejects_file": rejects,
	}
}

// progressLine shows an import's progress on stderr: one line redrawn in
// place on a terminal, a plain line every few seconds elsewhere (logs, CI),
// as `control snapshot build` does.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	file  string
	last  time.Time
	every time.Duration
	drawn bool
	// held is the latest progress not shown yet (throttled); finish
	// shows it so the line ends at the final state.
	held *importer.Progress
}

func newProgressLine(w io.Writer, file string) *progressLine {
	p := &progressLine{w: w, file: file, every: 5 * time.Second}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty, p.every = true, 100*time.Millisecond
	}
	p.last = time.Now()
	return p
}

func (p *progressLine) update(pr importer.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < p.every {
		p.held = &pr
		return
	}
	p.held = nil
	p.last = time.Now()
	p.draw(pr)
}

func (p *progressLine) draw(pr importer.Progress) {
	pct := 100.0
	if pr.BytesTotal > 0 {
		pct = 100 * float64(pr.BytesRead) / float64(pr.BytesTotal)
	}
	line := fmt.Sprintf("importing %s: %.0f%% read, %s rows done of %s read, %s imported, %s rejected",
		p.file, pct, thousands(pr.Done), thousands(pr.Rows), thousands(pr.Imported), thousands(pr.Rejected))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progressLine) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil && p.tty {
		p.draw(*p.held)
	}
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
