package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/runtimectl/runtimectl/engine"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/lang"
)

// doctorCheck is one line of `runtimectl doctor`.
type doctorCheck struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func newCmdDoctor(f *Factory) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check that sessions can run here: the Docker engine, the session images, the base image",
		Long: `Check what sessions need, one line per check, OK or FAIL, each FAIL with what to do:

  engine         the Docker engine that DOCKER_HOST (or --host, or the local socket) names answers;
                 its version and API version (TLS problems are named as such)
  base image     debian:bookworm-slim, which the session images are built from, is in the
                 engine (runtimectl never pulls; 'make base-image' makes it from Debian's packages)
  image LANG     each language's session image is present and carries the runtimectl agent

Exits 0 when every check passes and 125 when one fails.`,
		Example: `  runtimectl doctor
  runtimectl doctor --json
  DOCKER_HOST=tcp://build-box:2376 DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=~/.docker/certs runtimectl doctor`,
		Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			checks := runDoctor(c.Context(), f)
			failed := 0
			for _, ch := range checks {
				if !ch.OK {
					failed++
				}
			}
			if asJSON {
				if err := writeJSON(f.IO.Out, checks); err != nil {
					return err
				}
			} else {
				for _, ch := range checks {
					word := "OK  "
					if !ch.OK {
						word = "FAIL"
					}
					line := fmt.Sprintf("%s  %s: %s", word, ch.Check, ch.Detail)
					if ch.Fix != "" {
						line += "; " + ch.Fix
					}
					fmt.Fprintln(f.IO.Out, line)
				}
			}
			if failed > 0 {
				return fmt.Errorf("doctor: %d of %d checks failed; each FAIL line says what to do", failed, len(checks))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {check, ok, detail, fix}")
	return c
}

// runDoctor runs the checks in order; without an engine the others cannot run and are left out.
func runDoctor(ctx context.Context, f *Factory) []doctorCheck {
	if f.backend() == engine.Kubernetes {
		return runKubeDoctor(ctx, f)
	}
	eng, err := engineInfo(ctx, f, 10*time.Second)
	if err != nil {
		return []doctorCheck{{Check: "engine", Detail: errLine(err),
			Fix: "start dockerd, or point DOCKER_HOST (or --host) at a running engine; for tcp:// with TLS set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH"}}
	}
	checks := []doctorCheck{{Check: "engine", OK: true,
		Detail: fmt.Sprintf("%s %s at %s, API %s (negotiated %s), %s/%s", eng.Name, eng.Version, eng.Host, eng.APIVersion, eng.ClientAPI, eng.OS, eng.Arch)}}
	if eng.Name == "Podman" && strings.HasPrefix(eng.Host, "unix://") {
		checks = append(checks, podmanInit())
	}
	if eng.Rootless && eng.CgroupVersion == "1" {
		checks = append(checks, doctorCheck{Check: "limits",
			Detail: "a rootless engine on cgroup v1 ignores the sessions' memory, pids and CPU limits (Podman drops their ulimits too): a fork bomb or a memory bomb reaches the host user's limits",
			Fix:    "run the engine rootful, or on a cgroup v2 host with controllers delegated to the user"})
	}
	cl, _ := f.Client() // engineInfo connected it

	var langChecks []doctorCheck
	missing := false
	for _, n := range lang.Names() {
		l, _ := lang.Get(n)
		ref := images.Ref(l)
		ch := doctorCheck{Check: "image " + ref}
		im, err := docker.From(cl).Images().Inspect(ctx, ref)
		switch {
		case err == nil:
			h := im.Hash
			if len(h) > 12 {
				h = h[:12]
			}
			ch.OK = true
			ch.Detail = fmt.Sprintf("present, carries the agent (%s, content %s, %s, built %s)", n, h, humanSize(im.Size), ago(im.Created))
		case errors.Is(err, images.ErrNotFound):
			missing = true
			ch.Detail = "missing, so `session start --lang " + n + "` cannot work"
			ch.Fix = "build it with `runtimectl image build " + n + "`"
		case errors.Is(err, images.ErrNoAgent):
			missing = true
			ch.Detail = "present but it does not carry the runtimectl agent"
			ch.Fix = "rebuild it with `runtimectl image build " + n + " --force`"
		default:
			ch.Detail = errLine(err)
		}
		langChecks = append(langChecks, ch)
	}

	base := doctorCheck{Check: "base image " + images.DefaultBase}
	_, err = docker.From(cl).Images().Inspect(ctx, images.DefaultBase)
	switch {
	case err == nil || errors.Is(err, images.ErrNoAgent):
		base.OK, base.Detail = true, "present (the session images are built from it)"
	case errors.Is(err, images.ErrNotFound) && !missing:
		base.OK, base.Detail = true, "missing, but every session image is present; only rebuilding an image needs it (`make base-image` makes it)"
	case errors.Is(err, images.ErrNotFound):
		base.Detail = "missing, and runtimectl never pulls"
		base.Fix = "make it with `make base-image` (debootstrap from Debian's packages, in the source tree) or `docker pull " + images.DefaultBase + "`"
	default:
		base.Detail = errLine(err)
	}
	checks = append(checks, base)
	return append(checks, langChecks...)
}

// podmanInit checks, for a Podman engine on this machine, that Podman's init binary is here:
// sessions run with an init (HostConfig.Init), and Debian's podman package does not pull in
// catatonit when tini is installed.
func podmanInit() doctorCheck {
	// Podman looks for it at its init_path (containers.conf), by default this one; Debian's
	// catatonit package puts a link there.
	for _, p := range []string{"/usr/libexec/podman/catatonit"} {
		if _, err := os.Stat(p); err == nil {
			return doctorCheck{Check: "podman init", OK: true, Detail: p + " (sessions run with an init)"}
		}
	}
	return doctorCheck{Check: "podman init", Detail: "catatonit, Podman's init binary, is missing, so `session start` fails with \"container-init binary not found\"",
		Fix: "install the catatonit package (apt-get install catatonit)"}
}
