package pgserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrRunning is Start's error when a PostgreSQL this process did not
// start (one started by hand, or left by another program) runs on the data
// directory. Its lock file is left alone.
var ErrRunning = errors.New("pgserver: a PostgreSQL this process did not start runs on the data directory")

// clearStaleLock removes the data directory's postmaster.pid when a crash
// left it and PostgreSQL would take it for the lock of a live server: the
// pid in it has been given to another process since (after a reboot, in a
// restarted container, or by plain pid reuse), which PostgreSQL's own
// check ("is that pid alive?") cannot tell apart from its owner.
//
// It never removes the lock of a running server: when the pid is a
// postgres whose working directory is this data directory (every
// PostgreSQL process runs in its data directory) it returns ErrRunning,
// and when any postgres process still runs there (a backend that outlived
// its postmaster) it refuses too. A lock whose pid is gone is left for
// PostgreSQL, which clears it itself after checking that no process still
// holds the shared memory the lock names; so is one whose process this
// user may not inspect, which PostgreSQL may not signal either and
// therefore also treats as stale.
func (s *Server) clearStaleLock() error {
	file := filepath.Join(s.data, "postmaster.pid")
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgserver: read the lock file: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if pid < 0 {
		pid = -pid // a single-user backend writes its pid negated
	}
	if err == nil && pid != 0 {
		switch owner(pid, s.data) {
		case ownerGone, ownerUnknown:
			return nil
		case ownerThisData:
			return fmt.Errorf("%w: postmaster pid %d serves %s; stop it first: %s", ErrRunning, pid, s.data, s.stopCommand())
		}
	}
	// A torn lock file (a crash while postgres wrote it) or one naming
	// an unrelated process.
	if pids := postgresIn(s.data); len(pids) > 0 {
		return fmt.Errorf("%w: postgres processes %v still run in %s though its lock file names pid %q; stop them first", ErrRunning, pids, s.data, strings.TrimSpace(first))
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pgserver: remove a stale lock file: %w", err)
	}
	s.log.Warn("removed a stale postmaster.pid left by a crashed run: the pid in it is no PostgreSQL on this data directory",
		"pid", strings.TrimSpace(first), "data", s.data)
	return nil
}

// stopCommand is the shell command that stops a server on s's data
// directory that this process did not start.
func (s *Server) stopCommand() string {
	cmd := filepath.Join(s.bin, "pg_ctl") + " stop -D " + s.data
	if s.cred != nil {
		return "su postgres -c '" + cmd + "'"
	}
	return cmd
}

type lockOwner int

const (
	ownerGone     lockOwner = iota // no such process
	ownerUnknown                   // a process this user may not inspect
	ownerOther                     // a live process that is no postgres in this data directory
	ownerThisData                  // a postgres in this data directory
)

// owner says what process pid is, as far as the lock on data goes (Linux
// /proc: the command name and the working directory).
func owner(pid int, data string) lockOwner {
	proc := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(proc + "/comm")
	if errors.Is(err, os.ErrNotExist) {
		return ownerGone
	}
	if err != nil {
		return ownerUnknown
	}
	if strings.TrimSpace(string(comm)) != "postgres" {
		return ownerOther
	}
	cwd, err := os.Stat(proc + "/cwd")
	if errors.Is(err, os.ErrNotExist) {
		return ownerGone
	}
	if err != nil {
		return ownerUnknown
	}
	if dir, err := os.Stat(data); err == nil && os.SameFile(cwd, dir) {
		return ownerThisData
	}
	return ownerOther
}

// postgresIn lists the postgres processes whose working directory is data.
func postgresIn(data string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if owner(pid, data) == ownerThisData {
			pids = append(pids, pid)
		}
	}
	return pids
}
