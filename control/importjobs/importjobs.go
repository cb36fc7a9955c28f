// Package importjobs runs bulk imports that creators start in the console:
// an export of Bitly, YOURLS or Shlink (control/importer) uploaded to
// control and imported in the background, for the tenant whose session
// uploaded it.
//
// A job lives in PostgreSQL (schema/016_import_jobs.sql, kept by
// control/importjobs/pgstore): the file,
// its tenant and the key that started it, its options, state, progress,
// and at the end its counts and the importer's mapping and rejects files.
// Any control instance can show any job, and one runs it (Runner): it
// claims the job under a lease, renews the lease with every progress
// write, and writes the outcome only while it still holds the lease. A job
// whose instance died is claimed again by another once the lease has run
// out and run again from its first row; the importer's idempotency keys,
// derived from the job's identity and each chunk's index, make the chunks
// already created replay instead of create. After MaxResumes takeovers the
// job fails with a message instead.
//
// The import writes through the links service in process (Client), never
// over HTTP, with the tenant the job row holds, which the console set from
// its session.
package importjobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/importer"
)

// State is where a job is.
type State string

// States: queued until an instance claims it, running while one holds
// its lease, then done (every row has an outcome: imported, duplicate or
// rejected) or failed (it could not go through the file: Message says
// why).
const (
	Queued  State = "queued"
	Running State = "running"
	Done    State = "done"
	Failed  State = "failed"
)

// Finished reports whether s is an end state.
func (s State) Finished() bool { return s == Done || s == Failed }

// ErrTooMany refuses a job when its tenant already has as many waiting or
// running as it may.
var ErrTooMany = errors.New("too many imports waiting or running")

// Options are what a job is asked to do with its file.
type Options struct {
	Format importer.Format // auto, or the source system
	// Domain is the canonical host of the tenant's domain that rows
	// without a domain of their own go on; "" is the platform's.
	Domain string
	// RedirectType is the imported links' (301, 302, 307, 308); 0 is the
	// default.
	RedirectType int
	// DefaultDomains are the export's own default hosts (canonical),
	// whose rows go on Domain.
	DefaultDomains []string
}

// NewJob is an upload to import.
type NewJob struct {
	TenantID int64
	KeyID    int64 // the key of the session that uploaded it
	FileName string
	File     []byte
	Options
}

// BatchSize is links per batch of a console import: small enough that a
// 1,000-row file shows its progress in steps. A job keeps the size it was
// created with (its idempotency keys name chunks by index).
const BatchSize = 200

// Identity is a job's identity in its idempotency keys: the file's
// SHA-256 with every option that changes what is sent. The same file
// uploaded again by its tenant with the same options is the same import
// (it replays); with other options it is another. It never equals the
// CLI's, which is the file's digest alone (another batch size makes other
// chunks).
func Identity(file []byte, batch int, o Options) string {
	fileSum := sha256.Sum256(file)
	h := sha256.New()
	domains := slices.Clone(o.DefaultDomains)
	slices.Sort(domains)
	fmt.Fprintf(h, "edgelink console import v1\x00%d\x00%s\x00%d\x00%q\x00%x", batch, o.Domain, o.RedirectType, domains, fileSum)
	return hex.EncodeToString(h.Sum(nil))
}

// Counts are a finished job's outcomes (importer.Summary's).
type Counts struct {
	Rows, Kept, Existing, Recoded, Duplicates, Rejected int
	// Chunks sent; Replayed of them answered from an earlier run of the
	// same import; Failed not imported (their rows are rejected).
	Chunks, Replayed, Failed int
}

// Imported is how many rows have a link: kept, existing or re-coded.
func (c Counts) Imported() int { return c.Kept + c.Existing + c.Recoded }

// Job is an import as a page shows it; the file and the outputs are read
// apart (Store.Output).
type Job struct {
	ID       string
	TenantID int64
	KeyID    int64
	FileName string
	FileSize int64
	Options
	State State
	// DetectedFormat is the format read (Format, or what auto found);
	// empty until the job has run.
	DetectedFormat importer.Format
	// Resumes is how often another instance took the job over from one
	// that stopped renewing its lease.
	Resumes  int
	Progress importer.Progress
	Counts   Counts // set once finished
	// HasMapping and HasRejects say whether the outputs hold any row.
	HasMapping, HasRejects bool
	Message                string
	CreatedAt, UpdatedAt   time.Time
	StartedAt, FinishedAt  time.Time // zero until then
}

// Output names a job's downloadable file.
type Output string

// Outputs: the importer's mapping (old code → new code of every row with
// a link) and rejects (every row without one, with its reason) files.
const (
	Mapping Output = "mapping"
	Rejects Output = "rejects"
)

// ReaderMessage is an error of importer.NewReader (or of reading a file
// on) as a sentence for the console: the CLI's --format flag is the
// form's format field there.
func ReaderMessage(err error) string {
	msg := strings.ReplaceAll(err.Error(), "give --format", "choose the file's format")
	msg = strings.TrimSuffix(msg, ".")
	if msg == "" {
		return "it could not be read"
	}
	return msg
}

// Store stores and reads jobs for the console (pgstore.Store).
type Store interface {
	// Create stores a queued job for n.TenantID, unless the tenant
	// already has maxActive jobs queued or running (ErrTooMany).
	Create(ctx context.Context, n NewJob, maxActive int) (Job, error)
	// Job is the tenant's job id: link.ErrNotFound for an id that is
	// not one, or is another tenant's.
	Job(ctx context.Context, tenant int64, id string) (Job, error)
	// Jobs are the tenant's newest jobs, at most limit.
	Jobs(ctx context.Context, tenant int64, limit int) ([]Job, error)
	// Output is one of the tenant's job's output files, as the
	// importer wrote it: link.ErrNotFound for another tenant's job, an
	// unknown one, or one that has not written it.
	Output(ctx context.Context, tenant int64, id string, which Output) ([]byte, error)
}

// Queue is what the console uploads to: the store, each job created
// waking this instance's runner (if it has one) to claim it at once.
type Queue struct {
	Store
	Runner *Runner
}

// Create stores a queued job (Store.Create) and wakes the runner.
func (q Queue) Create(ctx context.Context, n NewJob, maxActive int) (Job, error) {
	j, err := q.Store.Create(ctx, n, maxActive)
	if err == nil && q.Runner != nil {
		q.Runner.Wake()
	}
	return j, err
}

// Claimed is a job an instance holds the lease of, with what it needs to
// run it.
type Claimed struct {
	Job
	File   []byte
	Digest string // Identity, as stored with the job
	Batch  int    // its batch size
}

// Outcome is how a run ended, as the runner writes it.
type Outcome struct {
	State            State
	Message          string
	Format           importer.Format
	Progress         importer.Progress
	Counts           Counts
	Mapping, Rejects []byte // the importer's files; nil: not written
}
