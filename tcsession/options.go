package tcsession

import (
	"fmt"

	"github.com/docker/go-units"
	"github.com/testcontainers/testcontainers-go"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

type options struct {
	spec       session.Spec
	keepVolume bool
	build      bool
}

// Option is an option of Run. It is a testcontainers.ContainerCustomizer, so tcsession's options
// and testcontainers' own (WithEnv, WithName, WithLabels, WithHostConfigModifier...) mix in one
// list.
type Option func(*options) error

// Customize implements testcontainers.ContainerCustomizer: Run reads tcsession's options
// itself, so it changes nothing in the request.
func (o Option) Customize(*testcontainers.GenericContainerRequest) error { return nil }

// WithLanguage sets the session's language (python, bash, node). The default is the language
// the image is labelled with (or, for a missing image, the one runtimectl's reference names),
// else python.
func WithLanguage(lang string) Option {
	return func(o *options) error { o.spec.Lang = lang; return nil }
}

// WithMemory sets the memory limit (also memory+swap), as Docker writes sizes: 512m, 2g. The
// default is that of `runtimectl session start` (2g).
func WithMemory(size string) Option {
	return func(o *options) error {
		n, err := units.RAMInBytes(size)
		if err != nil || n <= 0 {
			return fmt.Errorf("memory %q is not a size: use 512m, 2g or a number of bytes", size)
		}
		o.spec.Memory = n
		return nil
	}
}

// WithCPUs limits the session to n CPUs (1.5 is one and a half); the default is one, as for
// `runtimectl session start`.
func WithCPUs(n float64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("cpus %v: give a positive number such as 1 or 0.5", n)
		}
		o.spec.CPUs = n
		return nil
	}
}

// WithNetwork sets the network: none (the default) or bridge.
func WithNetwork(mode string) Option {
	return func(o *options) error { o.spec.Network = mode; return nil }
}

// WithSnapshots sets the snapshot policy: every (the default: after every execution that may
// have changed state) or manual.
func WithSnapshots(policy string) Option {
	return func(o *options) error { o.spec.Snapshot = policy; return nil }
}

// WithKeepVolume keeps the session's volumes when the container is terminated: the session can
// then be started again (`runtimectl session start NAME`) with its history and snapshots.
func WithKeepVolume() Option {
	return func(o *options) error { o.keepVolume = true; return nil }
}

// WithBuild builds the image from the Dockerfiles embedded in this module when it is missing
// (instead of failing with a message that says how to build it). It needs the engine's base
// image (debian:bookworm-slim) and a runtime-agent binary: $RUNTIMECTL_AGENT_BINARY, or one that
// `go build` makes from this module's source.
func WithBuild() Option {
	return func(o *options) error { o.build = true; return nil }
}

// WithSpec sets the whole session.Spec at once, for what no other option covers (pids, output
// cap, runtime, volume driver options...). Options after it change its fields; Run's image
// argument and testcontainers' WithName and WithEnv take precedence over its Image, Name and
// Env.
func WithSpec(spec session.Spec) Option {
	return func(o *options) error { o.spec = spec; return nil }
}

// Image returns the reference of runtimectl's image for a language, as `runtimectl image
// build` tags it: runtimectl/LANG:latest, or the tag in $RUNTIMECTL_IMAGE_TAG.
func Image(language string) string {
	if l, err := lang.Get(language); err == nil {
		return images.Ref(l)
	}
	return "runtimectl/" + language + ":" + images.Tag()
}

// langOfRef returns the language whose runtimectl image ref is, or "".
func langOfRef(ref string) string {
	for _, n := range lang.Names() {
		if Image(n) == ref {
			return n
		}
	}
	return ""
}
