package tcsession

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

// Container is a session's container: a testcontainers.Container (Terminate, Inspect, Logs,
// CopyFileToContainer... and testcontainers.CleanupContainer work as with any module) that
// also runs code.
type Container struct {
	testcontainers.Container

	name   string
	client *session.Client

	mu   sync.Mutex
	sess *session.Session
}

// SessionName returns the session's name: what `runtimectl session ls` shows and what
// session.Client's methods take. The container is named runtimectl-NAME.
func (c *Container) SessionName() string { return c.name }

// Client returns the session.Client that Run made, for what a test does with sessions beyond
// this one (Stop, Open, List...). Terminate closes it.
func (c *Container) Client() *session.Client { return c.client }

// Session returns the handle on the session opened when its agent answered: variables,
// snapshots, files, history... It is shared by every caller of Session and RunCode and safe
// for concurrent use; Terminate closes it.
func (c *Container) Session(ctx context.Context) (*session.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		s, _, err := c.client.Open(ctx, c.name)
		if err != nil {
			return nil, err
		}
		c.sess = s
	}
	return c.sess, nil
}

// RunCode runs code in the session and returns its result. Code that raises is not an error
// of RunCode: the Result says so (Status "error", Error set); err is for the runtime failing.
func (c *Container) RunCode(ctx context.Context, code string) (*session.Result, error) {
	s, err := c.Session(ctx)
	if err != nil {
		return nil, err
	}
	return s.Exec(ctx, code, session.ExecOptions{})
}

// Terminate closes the session handle, then stops and removes the container; a lifecycle hook
// removes the session's volumes unless WithKeepVolume was given.
func (c *Container) Terminate(ctx context.Context, opts ...testcontainers.TerminateOption) error {
	if c == nil || c.Container == nil {
		return nil
	}
	c.mu.Lock()
	if c.sess != nil {
		c.sess.Close()
		c.sess = nil
	}
	c.mu.Unlock()
	err := c.Container.Terminate(ctx, opts...)
	c.client.Close()
	return err
}

// Run starts a session in a container made from img by testcontainers-go, with the hardened
// defaults of `runtimectl session start`, and returns once its agent answers. On an error after
// the container was created, the Container is returned too, so that a cleanup registered before
// the error check (testcontainers.CleanupContainer) removes it.
func Run(ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) (*Container, error) {
	var o options
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{Image: img},
		Started:          true,
	}
	for _, opt := range opts {
		if so, ok := opt.(Option); ok {
			if err := so(&o); err != nil {
				return nil, fmt.Errorf("tcsession: %w", err)
			}
		}
		if err := opt.Customize(&req); err != nil {
			return nil, fmt.Errorf("tcsession: customize: %w", err)
		}
	}
	spec, err := specFor(o.spec, &req)
	if err != nil {
		return nil, fmt.Errorf("tcsession: %w", err)
	}

	de, err := docker.New("")
	if err != nil {
		return nil, fmt.Errorf("tcsession: %w", err)
	}
	client := session.NewWithEngine(de)
	if spec.Lang == "" {
		if im, err := docker.From(client).Images().Inspect(ctx, spec.Image); err == nil {
			spec.Lang = im.Lang
		} else {
			spec.Lang = langOfRef(spec.Image)
		}
	}
	if o.build {
		if err := buildIfMissing(ctx, client, spec); err != nil {
			client.Close()
			return nil, fmt.Errorf("tcsession: %w", err)
		}
	}
	cs, err := client.Prepare(ctx, spec, testcontainers.GenericLabels())
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("tcsession: %w", err)
	}
	removeVolumes := func(ctx context.Context) error {
		err := client.Remove(ctx, spec.Name, true)
		if errors.Is(err, session.ErrNotFound) {
			return nil
		}
		return err
	}
	hello := &helloStrategy{client: client, name: spec.Name, timeout: 3 * time.Minute}
	configure(&req, cs, hello)
	if !o.keepVolume {
		req.LifecycleHooks = append(req.LifecycleHooks, testcontainers.ContainerLifecycleHooks{
			PostTerminates: []testcontainers.ContainerHook{func(ctx context.Context, _ testcontainers.Container) error {
				return removeVolumes(ctx)
			}},
		})
	}

	ctr, err := testcontainers.GenericContainer(ctx, req)
	if ctr == nil {
		if err == nil {
			err = errors.New("testcontainers returned no container")
		}
		if !o.keepVolume {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			_ = removeVolumes(cctx)
			cancel()
		}
		client.Close()
		return nil, runError(spec.Name, err)
	}
	c := &Container{Container: ctr, name: spec.Name, client: client, sess: hello.sess}
	if err != nil {
		return c, runError(spec.Name, err)
	}
	return c, nil
}

// runError says what went wrong in testcontainers-go, and what to do when its reaper could not
// start.
func runError(name string, err error) error {
	if strings.Contains(err.Error(), "reaper:") {
		return fmt.Errorf("tcsession: session %q: testcontainers' reaper (Ryuk) could not start; where its image cannot be pulled, set TESTCONTAINERS_RYUK_DISABLED=true (Terminate cleans up): %w", name, err)
	}
	return fmt.Errorf("tcsession: session %q: %w", name, err)
}

// specFor completes the session's spec from the request that the options customized: the
// image, the name (testcontainers' WithName; a unique one otherwise) and the environment
// (WithEnv).
func specFor(spec session.Spec, req *testcontainers.GenericContainerRequest) (session.Spec, error) {
	if req.Image == "" {
		return spec, errors.New("no image: pass one, such as runtimectl/python:latest (`runtimectl image build` makes it)")
	}
	if req.Reuse {
		return spec, errors.New("container reuse is not supported: share one session across a package's tests from TestMain instead")
	}
	spec.Image = req.Image
	if req.Name != "" {
		spec.Name = strings.TrimPrefix(strings.TrimPrefix(req.Name, "/"), contract.NamePrefix)
	}
	if spec.Name == "" {
		b := make([]byte, 5)
		_, _ = rand.Read(b)
		spec.Name = "tc-" + hex.EncodeToString(b)
	}
	if err := session.ValidateName(spec.Name); err != nil {
		return spec, err
	}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		spec.Env = append(spec.Env, k+"="+req.Env[k])
	}
	return spec, nil
}

// configure points the request at the session's container: the name, labels, environment and
// hardened HostConfig that containers.Config builds (what `session start` creates), with the
// request's own modifiers, mounts and tmpfs applied on top, and the agent's hello as the wait
// strategy.
func configure(req *testcontainers.GenericContainerRequest, cs containers.Spec, hello wait.Strategy) {
	cfg, hc := containers.Config(cs)
	req.Name = containers.Name(cs.Session)
	req.Env = nil // in cfg.Env, with RUNTIMECTL_SETTINGS
	userCfg, userHost := req.ConfigModifier, req.HostConfigModifier
	req.ConfigModifier = func(c *container.Config) {
		out := *cfg
		out.Image = c.Image
		out.Labels = maps.Clone(c.Labels) // the request's and testcontainers' own
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		maps.Copy(out.Labels, cfg.Labels)
		out.Entrypoint, out.Cmd = c.Entrypoint, c.Cmd
		*c = out
		if userCfg != nil {
			userCfg(c)
		}
	}
	req.HostConfigModifier = func(h *container.HostConfig) {
		out := *hc
		out.Mounts = append(slices.Clone(hc.Mounts), h.Mounts...)
		out.Tmpfs = maps.Clone(hc.Tmpfs)
		maps.Copy(out.Tmpfs, h.Tmpfs)
		*h = out
		if userHost != nil {
			userHost(h)
		}
	}
	if req.WaitingFor != nil {
		req.WaitingFor = wait.ForAll(hello, req.WaitingFor)
	} else {
		req.WaitingFor = hello
	}
}
