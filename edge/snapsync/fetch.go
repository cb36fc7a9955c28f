package snapsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// fetchNewest downloads and verifies the newest snapshot in the bucket that
// is newer than cur (any, when cur is nil), trying older ones when the newest
// is refused. It returns nil without error when there is none; none reports
// that the bucket holds no snapshot at all (or does not exist yet).
func (s *Syncer) fetchNewest(ctx context.Context, cur *store.Loaded) (l *store.Loaded, none bool, err error) {
	obs, err := s.bucket(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("snapshot bucket: %w", err)
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list snapshots: %w", err)
	}
	type candidate struct {
		v    uint64
		info *jetstream.ObjectInfo
	}
	var cands []candidate
	for _, info := range infos {
		if v, ok := snapshot.ParseObjectName(info.Name); ok && !info.Deleted {
			cands = append(cands, candidate{v, info})
		}
	}
	if len(cands) == 0 {
		return nil, true, nil
	}
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(b.v, a.v) }) // newest first
	for _, c := range cands {
		if cur != nil && c.v <= cur.Snap.Header.ChangeVersion {
			break
		}
		if s.rejected[c.info.Name] == c.info.Digest {
			continue // refused before, unchanged since
		}
		l, err := s.fetch(ctx, obs, c.info, c.v)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, err
			}
			var dl downloadError
			if errors.As(err, &dl) {
				s.log.Warn("snapshot download failed; will retry", "name", c.info.Name, "err", err)
				continue // transient (deleted by pruning, timeout): try again later
			}
			s.rejected[c.info.Name] = c.info.Digest
			s.reject(err)
			continue
		}
		return l, false, nil
	}
	return nil, false, nil
}

// downloadError is a failure to get the bytes, not a verdict on them.
type downloadError struct{ err error }

func (e downloadError) Error() string { return e.err.Error() }
func (e downloadError) Unwrap() error { return e.err }

// fetch downloads one object, checks the object store's SHA-256 digest and
// every checksum and field of the file, and keeps it on disk. With a Dir the
// download goes to a temporary file there, which is opened in place
// (mapped) and, once verified, renamed to its name; without one it goes
// into a buffer of exactly its size, which becomes the in-memory snapshot.
func (s *Syncer) fetch(ctx context.Context, obs jetstream.ObjectStore, info *jetstream.ObjectInfo, v uint64) (*store.Loaded, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	defer cancel()
	res, err := obs.Get(ctx, info.Name)
	if err != nil {
		return nil, downloadError{fmt.Errorf("get %s: %w", info.Name, err)}
	}
	var (
		data []byte
		tmp  *os.File
		dst  io.Writer
	)
	if s.cfg.Dir == "" {
		data = make([]byte, info.Size)
		dst = &fixedBuffer{b: data}
	} else {
		if err := os.MkdirAll(s.cfg.Dir, 0o755); err != nil {
			res.Close()
			return nil, downloadError{fmt.Errorf("snapshot folder: %w", err)}
		}
		if tmp, err = os.CreateTemp(s.cfg.Dir, tmpPrefix+info.Name+"-*"); err != nil {
			res.Close()
			return nil, downloadError{fmt.Errorf("snapshot folder: %w", err)}
		}
		dst = tmp
	}
	// A read blocked on chunks that stopped coming (the NATS node serving
	// them went away) waits for the client's read deadline and ignores
	// cancellation, and Close waits for that read: leave both behind when
	// ctx ends, so shutdown and the next sync pass are not held up.
	type result struct {
		n   int64
		err error
	}
	read := make(chan result, 1)
	go func() {
		// Reading to EOF is what makes the client compare the digest.
		n, err := io.Copy(dst, res)
		read <- result{n, err}
	}()
	var r result
	select {
	case r = <-read:
	case <-ctx.Done():
		go func() {
			<-read
			res.Close()
			if tmp != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		return nil, downloadError{fmt.Errorf("read %s: %w", info.Name, ctx.Err())}
	}
	res.Close()
	if tmp != nil {
		defer os.Remove(tmp.Name()) // a no-op after the rename
		if r.err == nil {
			r.err = tmp.Sync()
		}
		if r.err == nil {
			// Verify reads it all next: from the disk, through readahead,
			// so that it serves from huge pages instead of the small ones
			// the writes left in the page cache.
			_ = snapshot.DropPageCache(tmp)
		}
		if err := tmp.Close(); r.err == nil {
			r.err = err
		}
	}
	if r.err != nil {
		if errors.Is(r.err, jetstream.ErrDigestMismatch) {
			return nil, fmt.Errorf("snapshot %s: %w", info.Name, r.err)
		}
		return nil, downloadError{fmt.Errorf("read %s: %w", info.Name, r.err)}
	}
	if r.n != int64(info.Size) {
		return nil, downloadError{fmt.Errorf("read %s: %d bytes, the object has %d", info.Name, r.n, info.Size)}
	}
	if tmp == nil {
		return verify(info.Name, v, data)
	}
	l, err := store.LoadFile(info.Name, tmp.Name())
	if err == nil {
		err = l.Verify(ctx)
	}
	if err == nil && l.Snap.Header.ChangeVersion != v {
		err = fmt.Errorf("%w: its header says change version %d", ErrMismatch, l.Snap.Header.ChangeVersion)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, downloadError{fmt.Errorf("verify %s: %w", info.Name, ctx.Err())}
		}
		return nil, fmt.Errorf("snapshot %s: %w", info.Name, err)
	}
	if err := s.keep(tmp.Name(), info.Name); err != nil {
		// The disk is a cache: serve the verified snapshot anyway (it
		// stays mapped after its temporary file is removed).
		s.log.Warn("snapshot: keep local copy", "name", info.Name, "err", err)
	}
	return l, nil
}

// tmpPrefix names downloads in progress in the snapshot folder.
const tmpPrefix = ".download-"

// fixedBuffer is an io.Writer into a buffer of the object's size: a longer
// object is an error, not a reallocation.
type fixedBuffer struct {
	b []byte
	n int
}

func (f *fixedBuffer) Write(p []byte) (int, error) {
	if len(p) > len(f.b)-f.n {
		return 0, errors.New("object longer than its size")
	}
	f.n += copy(f.b[f.n:], p)
	return len(p), nil
}

// verify loads data completely and checks that it is the snapshot its
// name says.
func verify(name string, v uint64, data []byte) (*store.Loaded, error) {
	l, err := store.Load(name, data)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	return l, checkName(l, name, v)
}

func checkName(l *store.Loaded, name string, v uint64) error {
	if got := l.Snap.Header.ChangeVersion; got != v {
		return fmt.Errorf("snapshot %s: %w: its header says change version %d", name, ErrMismatch, got)
	}
	return nil
}

// loadLocal returns the newest snapshot in Dir that opens, or nil: opened in
// place (store.LoadFile), in a time that does not grow with its size, with
// its entry sections left to VerifyInService. A copy was verified in full
// when it was downloaded and has only been renamed since, so what this
// skips checks for damage on the disk, not for a bad build; Run checks it
// next. Files that fail are renamed *.rejected (kept for inspection, never
// loaded again).
func (s *Syncer) loadLocal() *store.Loaded {
	if s.cfg.Dir == "" {
		return nil
	}
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("snapshot: read local copies", "err", err)
		}
		return nil
	}
	type file struct {
		name string
		v    uint64
	}
	var files []file
	for _, e := range ents {
		if v, ok := snapshot.ParseObjectName(e.Name()); ok && e.Type().IsRegular() {
			files = append(files, file{e.Name(), v})
		}
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			// A download a crash interrupted: it was never verified.
			_ = os.Remove(filepath.Join(s.cfg.Dir, e.Name()))
		}
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(b.v, a.v) })
	for _, f := range files {
		path := filepath.Join(s.cfg.Dir, f.name)
		l, err := store.LoadFile(path, path)
		if err == nil {
			if err = checkName(l, path, f.v); err == nil {
				return l
			}
		} else {
			err = fmt.Errorf("snapshot %s: %w", path, err)
		}
		s.reject(err)
		if err := os.Rename(path, path+".rejected"); err != nil {
			s.log.Warn("snapshot: set aside rejected local copy", "err", err)
		}
	}
	return nil
}

// keep renames the verified download tmp to Dir/name, fsyncs the folder so
// the rename survives a crash, and removes older copies (a copy in service
// stays mapped after its file is removed).
func (s *Syncer) keep(tmp, name string) error {
	if err := os.Rename(tmp, filepath.Join(s.cfg.Dir, name)); err != nil {
		return err
	}
	if d, err := os.Open(s.cfg.Dir); err == nil {
		_ = d.Sync() // best effort where folders cannot be synced
		d.Close()
	}
	v, _ := snapshot.ParseObjectName(name)
	ents, _ := os.ReadDir(s.cfg.Dir)
	for _, e := range ents {
		if old, ok := snapshot.ParseObjectName(e.Name()); ok && old < v {
			_ = os.Remove(filepath.Join(s.cfg.Dir, e.Name()))
		}
	}
	return nil
}
