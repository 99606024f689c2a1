// Package runinfo describes a benchmark run for its results file: when it
// ran, at which commit, with which command, on which machine. A figure
// quoted from a results file can then be traced to the code and the
// machine that produced it.
package runinfo

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Info is what a results file says about its run.
type Info struct {
	Date    string `json:"date"`    // UTC, RFC 3339
	Commit  string `json:"commit"`  // the build's commit, or git HEAD, with "+dirty" for changes (see commit)
	Command string `json:"command"` // as run from bench/
	Machine string `json:"machine"` // CPU, cores, memory, kernel, Go, file system
}

// Collect describes this run: the command is prog followed by the
// arguments the program got, and the file system is the one that holds
// dir.
func Collect(prog string, dir string) Info {
	return Info{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Commit:  commit(),
		Command: strings.Join(append([]string{"go run " + prog}, quoteArgs(os.Args[1:])...), " "),
		Machine: machine(dir),
	}
}

// Markdown returns the run's description as the lines a results file
// starts with.
func (i Info) Markdown() string {
	return fmt.Sprintf("- date: %s\n- commit: %s\n- command (in bench/): `%s`\n- machine: %s\n", i.Date, i.Commit, i.Command, i.Machine)
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

// commit returns the commit the program was built from, when the go
// command stamped it into the binary (go build does, go run does not:
// a binary built at one commit and run from a checkout of another would
// otherwise be described by the checkout), marked "+dirty" when the
// build's tree had changes (which, to the go command, include untracked
// files). Else it returns the repository's HEAD, marked "+dirty" when a
// tracked file differs from it (an untracked file, such as the results
// file being written, does not count).
func commit() string {
	if c := builtFrom(); c != "" {
		return c
	}
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (git rev-parse failed)"
	}
	c := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return c + " (git status failed)"
	}
	if len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}

// builtFrom returns the VCS revision stamped into the binary, short, with
// "+dirty" when the tree had changes, or "" when none was stamped.
func builtFrom() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return revision(bi.Settings)
}

// revision is builtFrom's reading of a build's settings.
func revision(settings []debug.BuildSetting) string {
	var rev string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	rev = rev[:min(len(rev), 12)]
	if modified {
		rev += "+dirty"
	}
	return rev
}

// machine is one line: CPU model and count, memory, kernel, Go, and the
// file system that holds dir.
func machine(dir string) string {
	var parts []string
	cpu := field("/proc/cpuinfo", "model name")
	parts = append(parts, fmt.Sprintf("%d CPUs (%s)", runtime.NumCPU(), orUnknown(cpu)))
	if mem := field("/proc/meminfo", "MemTotal"); mem != "" {
		var kb float64
		fmt.Sscanf(mem, "%f", &kb)
		parts = append(parts, fmt.Sprintf("%.0f GiB of memory", kb/(1<<20)))
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		parts = append(parts, "Linux "+unix.ByteSliceToString(u.Release[:]))
	}
	parts = append(parts, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	if fs := fileSystem(dir); fs != "" {
		parts = append(parts, fs)
	}
	return strings.Join(parts, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "model unknown"
	}
	return s
}

// field returns the value of the first "name : value" line of a /proc
// file.
func field(file, name string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// fileSystem names the file system type and device that hold dir, from
// the longest mount point in /proc/self/mountinfo that contains it.
func fileSystem(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	best, desc := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 2 {
			continue
		}
		mp := a[4]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, desc = mp, fmt.Sprintf("%s on %s (%s)", b[0], b[1], dir)
		}
	}
	return desc
}
