package importjobs_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/internal/poll"
)

// TestRunnerImportsAJob: a queued job is run to its end; its counts are
// the links made, its outputs the importer's files (hostile cells kept as
// they were: the console guards them when it serves them), and its file
// is dropped.
func TestRunnerImportsAJob(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	e.addDomain(t, acme, "go.acme.test")
	file := append(csvRows("row", 450),
		"=cmd|' /C calc'!A0,https://example.com/formula,\"=HYPERLINK(\"\"http://evil\"\")\"\n"+
			"hostile-1,https://example.com/x,<script>alert(1)</script>\n"+
			"bad-url,ftp://example.com/nope,t\n"+
			"row-0001,https://example.com/row/1,again\n"...)
	r := e.runner(t, e.svc, importjobs.Config{})
	j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "export.csv", File: file,
		Options: importjobs.Options{Format: importer.Auto, Domain: "go.acme.test", RedirectType: 307}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	r.Wake()
	j = e.waitState(t, acme, j.ID, importjobs.Done)
	want := importjobs.Counts{Rows: 454, Kept: 451, Recoded: 1, Duplicates: 1, Rejected: 1, Chunks: 3}
	if j.Counts != want || j.DetectedFormat != importer.YOURLS || j.Message != "" || !j.HasMapping || !j.HasRejects {
		t.Fatalf("finished job %+v\nwant counts %+v", j, want)
	}
	if j.Progress.Rows != 454 || j.Progress.Done != 454 || j.Progress.BytesRead != int64(len(file)) {
		t.Errorf("final progress %+v", j.Progress)
	}
	if n := e.count(t, acme); n != 452 {
		t.Errorf("%d links; want 452", n)
	}
	l, err := e.svc.Get(ctx, acme, "go.acme.test", "hostile-1")
	if err != nil || l.Title != "<script>alert(1)</script>" || l.RedirectType != 307 {
		t.Errorf("the hostile row's link: %+v, %v; want its title stored as text, 307, on the domain", l, err)
	}
	mapping, err := e.jobs.Output(ctx, acme, j.ID, importjobs.Mapping)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(mapping)).ReadAll()
	if err != nil || len(recs) != 453 || strings.Join(recs[0], ",") != strings.Join(importer.MappingHeader, ",") {
		t.Fatalf("mapping: %d records, %v; header %v", len(recs), err, recs[0])
	}
	if rec := recs[len(recs)-1]; rec[0] != "hostile-1" || rec[6] != "go.acme.test" {
		t.Errorf("the mapping's last row %q", rec)
	}
	found := false
	for _, rec := range recs {
		found = found || (rec[0] == "=cmd|' /C calc'!A0" && rec[2] == string(importer.Recoded))
	}
	if !found {
		t.Error("the formula code is not in the mapping as it was, re-coded")
	}
	rejects, err := e.jobs.Output(ctx, acme, j.ID, importjobs.Rejects)
	if err != nil || !bytes.Contains(rejects, []byte("bad-url")) || !bytes.Contains(rejects, []byte("duplicate")) {
		t.Errorf("rejects: %q, %v", rejects, err)
	}
	var held bool
	if err := e.pool.QueryRow(ctx, `SELECT file IS NOT NULL FROM import_jobs WHERE id = $1`, j.ID).Scan(&held); err != nil || held {
		t.Errorf("the finished job still holds its file (%v)", err)
	}
}

// TestUnreadableFileFails: a file that is no export fails its job with
// the reader's reason, in the console's words.
func TestUnreadableFileFails(t *testing.T) {
	e := newEnv(t)
	acme, key, _ := e.tenant(t, "acme")
	e.runner(t, e.svc, importjobs.Config{})
	j, err := e.jobs.Create(context.Background(), importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "notes.csv",
		File: []byte("name,colour\nfoo,blue\n"), Options: importjobs.Options{Format: importer.Auto}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	j = e.waitState(t, acme, j.ID, importjobs.Failed)
	if !strings.Contains(j.Message, "cannot tell the export's format") || !strings.Contains(j.Message, "choose the file's format") || strings.Contains(j.Message, "--format") {
		t.Errorf("message %q", j.Message)
	}
}

// TestResumeAfterACrash: an instance claims a job, imports part of it and
// dies without a word (its lease left to run out). Another instance takes
// the job over and finishes it: the chunks the first made replay, every
// row has exactly one link, and the job says it was resumed.
func TestResumeAfterACrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	const rows = 1000
	j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "big.csv", File: csvRows("c", rows),
		Options: importjobs.Options{Format: importer.Auto}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	// The instance that dies: it claims the job under a lease of a
	// second, lets two batches through, and is gone while its third
	// waits — none of its renewals, its giving back or its outcome ever
	// reach the database.
	after := &afterLinks{Links: e.svc, pass: 2, held: make(chan struct{})}
	dead := importjobs.NewRunner(deadLeases{e.jobs}, after, e.short, importjobs.Config{Instance: "dead", Concurrency: 1,
		Lease: time.Second, Poll: time.Hour, Heartbeat: 50 * time.Millisecond})
	runCtx, crash := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); dead.Run(runCtx) }()
	t.Cleanup(func() { crash(); <-stopped })
	<-after.held
	crash()
	<-stopped
	partial := e.count(t, acme)
	if partial != 2*importjobs.BatchSize {
		t.Fatalf("the crashed run made %d links; want its two batches'", partial)
	}
	if j, err := e.jobs.Job(ctx, acme, j.ID); err != nil || j.State != importjobs.Running {
		t.Fatalf("after the crash: %+v, %v; want still running under the dead lease", j, err)
	}
	e.runner(t, e.svc, importjobs.Config{Instance: "alive", Lease: 3 * time.Second})
	j = e.waitState(t, acme, j.ID, importjobs.Done)
	if n := e.count(t, acme); n != rows {
		t.Errorf("%d links after the takeover; want %d, none twice", n, rows)
	}
	if j.Resumes != 1 || j.Counts.Kept != rows || j.Counts.Replayed < 2 || j.Counts.Replayed >= j.Counts.Chunks {
		t.Errorf("after the takeover: resumes %d, counts %+v; want 1 resume, all kept, the crashed run's chunks replayed", j.Resumes, j.Counts)
	}
}

// TestShutdownGivesJobsBack: an instance stopping in the middle of a job
// gives it back to the queue at once (not counted as a resume), and the
// next instance finishes it.
func TestShutdownGivesJobsBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	gate := newGate(e.svc)
	r := importjobs.NewRunner(e.jobs, gate, e.short, importjobs.Config{Instance: "first", Poll: 50 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-stopped })
	j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "f.csv", File: csvRows("s", 300), Options: importjobs.Options{Format: importer.Auto}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.entered // a batch is in flight
	stop()
	<-stopped
	j, err = e.jobs.Job(ctx, acme, j.ID)
	if err != nil || j.State != importjobs.Queued || j.Resumes != 0 {
		t.Fatalf("after shutdown: %+v, %v; want queued, no resume", j, err)
	}
	e.runner(t, e.svc, importjobs.Config{Instance: "second"})
	if j = e.waitState(t, acme, j.ID, importjobs.Done); j.Counts.Kept != 300 || j.Resumes != 0 {
		t.Errorf("finished by the next instance: %+v", j)
	}
}

// TestUnrenewableLeaseStopsTheRun: an instance that cannot renew its
// lease for as long as the lease lasts (the database unreachable to it:
// here its table renamed away) stops its run and writes nothing, since
// another instance may hold the job by then; once the lease has run out
// the job is taken over and finished, no link made twice.
func TestUnrenewableLeaseStopsTheRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	gate := newGate(e.svc)
	e.runner(t, gate, importjobs.Config{Instance: "cut-off", Lease: 900 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
	j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "f.csv", File: csvRows("l", 250), Options: importjobs.Options{Format: importer.Auto}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.entered
	if _, err := e.pool.Exec(ctx, `ALTER TABLE import_jobs RENAME TO import_jobs_away`); err != nil {
		t.Fatal(err)
	}
	<-gate.gaveUp // the run stopped itself
	close(gate.gate)
	if _, err := e.pool.Exec(ctx, `ALTER TABLE import_jobs_away RENAME TO import_jobs`); err != nil {
		t.Fatal(err)
	}
	j = e.waitState(t, acme, j.ID, importjobs.Done)
	if j.Resumes != 1 || j.Counts.Kept != 250 {
		t.Errorf("after the takeover: resumes %d, counts %+v; want 1 and 250 kept", j.Resumes, j.Counts)
	}
	if n := e.count(t, acme); n != 250 {
		t.Errorf("%d links; want 250", n)
	}
}

// TestRevokedKeyStopsARunningJob: revoking the key that started a job
// fails it at its next heartbeat, saying why.
func TestRevokedKeyStopsARunningJob(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	gate := newGate(e.svc)
	e.runner(t, gate, importjobs.Config{})
	j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "f.csv", File: csvRows("k", 10), Options: importjobs.Options{Format: importer.Auto}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.entered
	if _, err := e.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, key); err != nil {
		t.Fatal(err)
	}
	j = e.waitState(t, acme, j.ID, importjobs.Failed)
	if !strings.Contains(j.Message, "revoked") {
		t.Errorf("message %q", j.Message)
	}
	if n := e.count(t, acme); n != 0 {
		t.Errorf("%d links made after the key was revoked", n)
	}
}

// TestConcurrencyBounds: a tenant runs one job at a time across
// instances, an instance at most MaxRunning; what waits stays queued and
// claimable.
func TestConcurrencyBounds(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, acmeKey, _ := e.tenant(t, "acme")
	rival, rivalKey, _ := e.tenant(t, "rival")
	third, thirdKey, _ := e.tenant(t, "third")
	gate := newGate(e.svc)
	create := func(tenant, key int64, prefix string) importjobs.Job {
		j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: tenant, KeyID: key, FileName: "f.csv", File: csvRows(prefix, 5), Options: importjobs.Options{Format: importer.Auto}}, 3)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a1, a2, b1 := create(acme, acmeKey, "a1"), create(acme, acmeKey, "a2"), create(rival, rivalKey, "b1")
	c1 := create(third, thirdKey, "c1")
	e.runner(t, gate, importjobs.Config{Instance: "one", MaxRunning: 2, PerTenant: 1})
	e.waitState(t, acme, a1.ID, importjobs.Running)
	e.waitState(t, rival, b1.ID, importjobs.Running)
	// Another instance may not take acme's second job (acme has one
	// running) but may take the third tenant's, which the first instance,
	// full, left queued.
	c, err := e.jobs.Claim(ctx, "two", time.Minute, 1)
	if err != nil || c == nil || c.ID != c1.ID {
		t.Fatalf("the second instance claimed %+v, %v; want the third tenant's job", c, err)
	}
	if err := e.jobs.Release(ctx, c.ID, "two"); err != nil {
		t.Fatal(err)
	}
	if j, err := e.jobs.Job(ctx, acme, a2.ID); err != nil || j.State != importjobs.Queued {
		t.Fatalf("acme's second job: %+v, %v; want queued", j, err)
	}
	close(gate.gate)
	for _, j := range []struct {
		tenant int64
		id     string
	}{{acme, a1.ID}, {acme, a2.ID}, {rival, b1.ID}, {third, c1.ID}} {
		if got := e.waitState(t, j.tenant, j.id, importjobs.Done); got.Counts.Kept != 5 {
			t.Errorf("job %s: %+v", j.id, got.Counts)
		}
	}
}

// TestProgressIsVisibleWhileRunning: the progress a page reads grows
// while a job runs, before it is done.
func TestProgressIsVisibleWhileRunning(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	step := &stepLinks{Links: e.svc, next: make(chan struct{})}
	e.runner(t, step, importjobs.Config{Concurrency: 1})
	j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "f.csv", File: csvRows("p", 3*importjobs.BatchSize), Options: importjobs.Options{Format: importer.Auto}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	step.next <- struct{}{} // the first batch goes through
	var seen importjobs.Job
	poll.Until(t, "progress after one batch", time.Minute, func() bool {
		seen, err = e.jobs.Job(ctx, acme, j.ID)
		return err == nil && seen.Progress.Done >= importjobs.BatchSize
	})
	if seen.State != importjobs.Running || seen.Progress.Imported != importjobs.BatchSize || seen.Progress.BytesRead == 0 {
		t.Errorf("mid-run: %s %+v", seen.State, seen.Progress)
	}
	step.next <- struct{}{}
	step.next <- struct{}{}
	if j = e.waitState(t, acme, j.ID, importjobs.Done); j.Counts.Kept != 3*importjobs.BatchSize {
		t.Errorf("counts %+v", j.Counts)
	}
}

// stepLinks lets one batch through per message on next.
type stepLinks struct {
	importjobs.Links
	next chan struct{}
}

func (s *stepLinks) CreateBatch(ctx context.Context, tenant int64, key string, reqs []links.CreateRequest) (links.BatchResult, error) {
	select {
	case <-s.next:
	case <-ctx.Done():
		return links.BatchResult{}, ctx.Err()
	}
	return s.Links.CreateBatch(ctx, tenant, key, reqs)
}

// deadLeases is a store as an instance sees it that has died right after
// its claim: the claim went through; its renewals, giving back and
// outcome never reach the database (the one fault a real store cannot be
// made to show on cue).
type deadLeases struct{ importjobs.Leases }

func (deadLeases) Heartbeat(context.Context, string, string, time.Duration, importer.Progress) (bool, bool, error) {
	return true, false, nil
}
func (deadLeases) Release(context.Context, string, string) error { return nil }
func (deadLeases) Finish(context.Context, string, string, importjobs.Outcome) (bool, error) {
	return true, nil
}

// afterLinks lets pass batches through, then holds the next ones until
// their run stops, closing held when the first is held.
type afterLinks struct {
	importjobs.Links
	pass int
	held chan struct{}
	mu   sync.Mutex
	n    int
}

func (a *afterLinks) CreateBatch(ctx context.Context, tenant int64, key string, reqs []links.CreateRequest) (links.BatchResult, error) {
	a.mu.Lock()
	a.n++
	n := a.n
	a.mu.Unlock()
	if n <= a.pass {
		return a.Links.CreateBatch(ctx, tenant, key, reqs)
	}
	if n == a.pass+1 {
		close(a.held)
	}
	<-ctx.Done()
	return links.BatchResult{}, ctx.Err()
}
