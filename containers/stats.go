package containers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/docker/docker/api/types/container"

	"github.com/runtimectl/runtimectl/engine"
)

// Stats is a running container's use of the host, as `docker stats` shows it (engine.Stats).
type Stats = engine.Stats

// Stats samples the session's container (the engine measures over about a second).
func (m *Manager) Stats(ctx context.Context, session string) (Stats, error) {
	r, err := m.api.ContainerStats(ctx, Name(session), false)
	if err != nil {
		return Stats{}, fmt.Errorf("stats of session %q: %w", session, m.classify(err))
	}
	defer r.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		return Stats{}, fmt.Errorf("stats of session %q: %w", session, err)
	}
	out := Stats{MemoryBytes: int64(s.MemoryStats.Usage), MemoryLimit: int64(s.MemoryStats.Limit),
		Pids: int64(s.PidsStats.Current), PidsLimit: int64(s.PidsStats.Limit)}
	// The page cache counts in usage; docker stats shows usage less the inactive file pages.
	for _, k := range []string{"total_inactive_file", "inactive_file"} {
		if v, ok := s.MemoryStats.Stats[k]; ok && v < s.MemoryStats.Usage {
			out.MemoryBytes = int64(s.MemoryStats.Usage - v)
			break
		}
	}
	cpu := float64(s.CPUStats.CPUUsage.TotalUsage) - float64(s.PreCPUStats.CPUUsage.TotalUsage)
	sys := float64(s.CPUStats.SystemUsage) - float64(s.PreCPUStats.SystemUsage)
	if cpu > 0 && sys > 0 {
		n := float64(s.CPUStats.OnlineCPUs)
		if n == 0 {
			n = float64(len(s.CPUStats.CPUUsage.PercpuUsage))
		}
		out.CPUPercent = cpu / sys * n * 100
	}
	return out, nil
}
