// Package measure reads the kernel's per-process and per-machine CPU and
// memory accounting from /proc, and starts and stops the processes a
// benchmark runs, each in its own process group, optionally pinned to CPUs
// with taskset.
package measure

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ClockTicks is sysconf(_SC_CLK_TCK), 100 on every Linux the benchmark runs on.
const ClockTicks = 100

// Stat is the part of /proc/<pid>/stat a benchmark needs.
type Stat struct {
	PID, PPID, PGRP int
	Comm            string
	State           byte
	UTime, STime    uint64 // clock ticks, all threads, live and exited
	NumThreads      int
	RSSPages        int64
}

// CPUSeconds is utime+stime in seconds.
func (s Stat) CPUSeconds() float64 { return float64(s.UTime+s.STime) / ClockTicks }

// ParseStat parses the contents of /proc/<pid>/stat. The command name is in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open || end+2 > len(b) {
		return s, errors.New("stat: no command name in parentheses")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return s, fmt.Errorf("stat: pid: %w", err)
	}
	s.PID, s.Comm = pid, string(b[open+1:end])
	// f[0] is field 3 (state); field k is f[k-3].
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 22 {
		return s, fmt.Errorf("stat: %d fields after the command name, want at least 22", len(f))
	}
	s.State = f[0][0]
	ints := []struct {
		field int
		dst   any
	}{{4, &s.PPID}, {5, &s.PGRP}, {14, &s.UTime}, {15, &s.STime}, {20, &s.NumThreads}, {24, &s.RSSPages}}
	for _, x := range ints {
		v := f[x.field-3]
		switch d := x.dst.(type) {
		case *int:
			n, err := strconv.Atoi(v)
			if err != nil {
				return s, fmt.Errorf("stat: field %d: %w", x.field, err)
			}
			*d = n
		case *uint64:
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("stat: field %d: %w", x.field, err)
			}
			*d = n
		case *int64:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("stat: field %d: %w", x.field, err)
			}
			*d = n
		}
	}
	return s, nil
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// Tree returns pid and every live descendant of it (nginx's workers, for
// example), by scanning /proc.
func Tree(pid int) []int {
	children := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, err := ReadStat(p)
		if err != nil {
			continue
		}
		children[st.PPID] = append(children[st.PPID], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// Usage sums CPU seconds and resident memory over pids; processes that
// have gone are skipped.
func Usage(pids []int) (cpuSeconds float64, rssBytes int64) {
	page := int64(os.Getpagesize())
	for _, p := range pids {
		st, err := ReadStat(p)
		if err != nil {
			continue
		}
		cpuSeconds += st.CPUSeconds()
		rssBytes += st.RSSPages * page
	}
	return cpuSeconds, rssBytes
}

// MachineCPU is the machine's busy and total CPU time from /proc/stat's
// first line, in seconds summed over all CPUs.
type MachineCPU struct{ Busy, Total float64 }

// ParseMachineCPU parses /proc/stat. Busy is everything but idle and
// iowait; guest time is already inside user and nice.
func ParseMachineCPU(b []byte) (MachineCPU, error) {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return MachineCPU{}, errors.New("/proc/stat: no cpu line")
	}
	var busy, total uint64
	for i, v := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return MachineCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return MachineCPU{Busy: float64(busy) / ClockTicks, Total: float64(total) / ClockTicks}, nil
}

// ReadMachineCPU reads /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	return ParseMachineCPU(b)
}
