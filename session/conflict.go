package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/snapshot"
)

// conflictsWith returns the settings that spec asks for and the recorded settings st differ
// in, one phrase each, worded as Spec's field and as the CLI's flag ("Memory 4GiB (the
// session has 2GiB)", "--memory 4GiB (...)"). A field spec leaves zero asks
// for nothing; both sides are compared with their defaults filled in, so asking for a default
// that the session has is no conflict.
func conflictsWith(spec Spec, st Settings) []advice.Words {
	var out []advice.Words
	diff := func(field, cliFlag, want, have string) {
		if want != have {
			rest := fmt.Sprintf(" %s (the session has %s)", want, have)
			out = append(out, advice.Words{Lib: field + rest, CLI: cliFlag + rest})
		}
	}
	size := humanSize
	orInt := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	if spec.Lang != "" {
		diff("Lang", "--lang", spec.Lang, st.Lang)
	}
	if spec.Image != "" {
		diff("Image", "--image", spec.Image, st.Image)
	}
	if spec.Memory != 0 {
		diff("Memory", "--memory", size(spec.Memory), size(orInt(st.Memory, engine.DefaultMemory)))
	}
	if spec.CPUs != 0 {
		have := st.CPUs
		if have == 0 {
			have = engine.DefaultCPUs
		}
		diff("CPUs", "--cpus", fmt.Sprint(spec.CPUs), fmt.Sprint(have))
	}
	if spec.Pids != 0 {
		diff("Pids", "--pids", fmt.Sprint(spec.Pids), fmt.Sprint(orInt(st.Pids, engine.DefaultPids)))
	}
	if spec.Network != "" {
		have := st.Network
		if have == "" {
			have = engine.DefaultNetwork
		}
		diff("Network", "--network", spec.Network, have)
	}
	if len(spec.Env) > 0 {
		want, have := slices.Clone(spec.Env), slices.Clone(st.Env)
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(want, have) {
			diff("Env", "--env", envKeys(want), envKeys(have))
		}
	}
	if spec.Snapshot != "" {
		have := string(st.Snapshot)
		if have == "" {
			have = string(contract.SnapshotEvery)
		}
		diff("Snapshot", "--snapshot", spec.Snapshot, have)
	}
	if spec.KeepSnapshots != 0 {
		diff("KeepSnapshots", "--keep-snapshots", fmt.Sprint(spec.KeepSnapshots), fmt.Sprint(orInt(int64(st.KeepSnapshots), snapshot.DefaultKeep)))
	}
	if spec.MaxOutput != 0 {
		diff("MaxOutput", "--max-output", size(spec.MaxOutput), size(orInt(st.MaxOutput, 4<<20)))
	}
	if spec.Disk != 0 {
		diff("Disk", "--disk", size(spec.Disk), size(orInt(st.Disk, contract.DefaultDisk)))
	}
	if spec.Runtime != "" {
		have := st.Runtime
		if have == "" {
			have = "the engine's default"
		}
		diff("Runtime", "--runtime", spec.Runtime, have)
	}
	if spec.TTL != 0 {
		have := "none"
		if d, err := time.ParseDuration(st.TTL); err == nil && st.TTL != "" {
			have = d.String()
		}
		diff("TTL", "--ttl", spec.TTL.String(), have)
	}
	if spec.IdleStop != 0 {
		have := "none"
		if d, err := time.ParseDuration(st.IdleStop); err == nil && st.IdleStop != "" {
			have = d.String()
		}
		diff("IdleStop", "--idle-stop", spec.IdleStop.String(), have)
	}
	return append(out, egressConflicts(spec, st)...)
}

// asksSettings reports whether spec names any setting that conflictsWith compares.
func (s Spec) asksSettings() bool {
	return s.Lang != "" || s.Image != "" || s.Memory != 0 || s.CPUs != 0 || s.Pids != 0 || s.Network != "" ||
		len(s.Env) > 0 || s.Snapshot != "" || s.KeepSnapshots != 0 || s.MaxOutput != 0 || s.Disk != 0 ||
		s.Runtime != "" || s.IdleStop != 0 || s.TTL != 0 || len(s.AllowHosts) > 0 || len(s.SecretHeaders) > 0
}

// envKeys names the variables of KEY=VALUE entries (values can be secrets).
func envKeys(env []string) string {
	if len(env) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return strings.Join(keys, ",") + " (values not shown)"
}

// checkConflicts refuses a start of an existing session whose spec asks for other settings
// than the recorded ones (ErrConflict); a spec that names none (Open, exec) costs nothing.
func (c *Client) checkConflicts(ctx context.Context, spec Spec) error {
	if !spec.asksSettings() {
		return nil
	}
	st, err := c.RecordedSettings(ctx, spec.Name)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil // a new session
		}
		return nil // unreadable settings are reported by the start itself
	}
	if diff := conflictsWith(spec, st); len(diff) > 0 {
		var lib, cli []string
		for _, d := range diff {
			lib, cli = append(lib, d.Lib), append(cli, d.CLI)
		}
		return advice.Errorf("%w: session %q exists with other settings: %s; %s", ErrConflict, spec.Name,
			advice.Words{Lib: strings.Join(lib, "; "), CLI: strings.Join(cli, "; ")},
			advice.Words{
				Lib: "start it without them (its settings hold across stop and start; Client.Upgrade moves it to the current build of its image), or remove it (Client.Remove, after copying out what you need) and start it again with the new ones",
				CLI: "start it without them (its settings hold across stop and start; `--upgrade` moves it to the current build of its image), or remove it (`session rm`, after `session cp` of what you need) and start it again with the new ones",
			})
	}
	return nil
}

// humanSize spells a size as the CLI and messages do ("2GiB").
func humanSize(b int64) string { return units.BytesSize(float64(b)) }
