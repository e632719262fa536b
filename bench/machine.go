package bench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where the benchmarks ran: the header of the results.
type Machine struct {
	Cores         int     `json:"cores"`
	CPU           string  `json:"cpu"`
	MemoryBytes   int64   `json:"memory_bytes"`
	Kernel        string  `json:"kernel"`
	DockerVersion string  `json:"docker_version"`
	DockerAPI     string  `json:"docker_api"`
	StorageDriver string  `json:"storage_driver,omitempty"`
	CgroupVersion string  `json:"cgroup_version,omitempty"`
	GoVersion     string  `json:"go_version"`
	Commit        string  `json:"commit,omitempty"`
	Date          string  `json:"date"`
	LoadAvg       string  `json:"load_avg_at_start,omitempty"`
	Command       string  `json:"command"`
	DurationS     float64 `json:"duration_s"`
}

// DescribeMachine fills in what it can find; fields it cannot read stay empty.
func DescribeMachine(ctx context.Context, d *Docker) Machine {
	m := Machine{
		Cores:     runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Date:      time.Now().UTC().Format(time.RFC3339),
		Command:   "make bench",
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				m.MemoryBytes = kb << 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if d != nil {
		if v, err := d.cli.ServerVersion(ctx); err == nil {
			m.DockerVersion, m.DockerAPI = v.Version, v.APIVersion
		}
		if info, err := d.cli.Info(ctx); err == nil {
			m.StorageDriver, m.CgroupVersion = info.Driver, info.CgroupVersion
		}
	}
	return m
}
