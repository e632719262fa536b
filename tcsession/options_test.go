package tcsession

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/session"
)

func TestBadOptionsAreOneLineErrorsBeforeDocker(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []testcontainers.ContainerCustomizer
		want string
	}{
		{"memory", []testcontainers.ContainerCustomizer{WithMemory("lots")}, `memory "lots" is not a size: use 512m, 2g`},
		{"cpus", []testcontainers.ContainerCustomizer{WithCPUs(-1)}, "cpus -1: give a positive number"},
		{"name", []testcontainers.ContainerCustomizer{testcontainers.WithName("Bad Name")}, `session name "Bad Name": use 1 to 63 characters`},
		{"reuse", []testcontainers.ContainerCustomizer{testcontainers.WithReuseByName("x")}, "container reuse is not supported"},
		{"network", []testcontainers.ContainerCustomizer{WithLanguage("python"), WithNetwork("host")}, `network "host": use none or bridge`},
		{"snapshots", []testcontainers.ContainerCustomizer{WithLanguage("python"), WithSnapshots("often")}, `snapshot policy "often": use every or manual`},
		{"language", []testcontainers.ContainerCustomizer{WithLanguage("cobol")}, `unknown language "cobol"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Run(ctx, "runtimectl/python:latest", tc.opts...)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	_, err := Run(ctx, "")
	assert.ErrorContains(t, err, "no image: pass one, such as runtimectl/python:latest")
}

func TestSpecForTakesNameImageAndEnvFromTheRequest(t *testing.T) {
	req := testcontainers.GenericContainerRequest{ContainerRequest: testcontainers.ContainerRequest{Image: "img:1"}}
	for _, opt := range []testcontainers.ContainerCustomizer{
		testcontainers.WithName("runtimectl-mine"), testcontainers.WithEnv(map[string]string{"B": "2", "A": "1"}),
	} {
		require.NoError(t, opt.Customize(&req))
	}
	spec, err := specFor(session.Spec{Env: []string{"Z=0"}}, &req)
	require.NoError(t, err)
	assert.Equal(t, "mine", spec.Name, "the container name runtimectl-NAME is the session NAME")
	assert.Equal(t, "img:1", spec.Image)
	assert.Equal(t, []string{"Z=0", "A=1", "B=2"}, spec.Env)

	req = testcontainers.GenericContainerRequest{ContainerRequest: testcontainers.ContainerRequest{Image: "img:1"}}
	a, err := specFor(session.Spec{}, &req)
	require.NoError(t, err)
	b, err := specFor(session.Spec{}, &req)
	require.NoError(t, err)
	assert.NotEqual(t, a.Name, b.Name, "each Run gets its own session name")
	assert.NoError(t, session.ValidateName(a.Name))
}

// The request's configuration is the hardened one that containers.Config builds, with what the
// caller's own testcontainers options add on top.
func TestConfigureAppliesTheHardeningThenTheCallersModifiers(t *testing.T) {
	cs := containers.Spec{Session: "s1", Lang: "python", Image: "img:1", Volume: "runtimectl-s1", Memory: 512 << 20, Env: []string{"A=1"}, Settings: "{}"}
	wantCfg, wantHC := containers.Config(cs)

	req := testcontainers.GenericContainerRequest{ContainerRequest: testcontainers.ContainerRequest{Image: "img:1"}}
	for _, opt := range []testcontainers.ContainerCustomizer{
		testcontainers.WithHostConfigModifier(func(h *container.HostConfig) { h.ShmSize = 1 << 20 }),
		testcontainers.WithLabels(map[string]string{"team": "qa", contract.LabelSession: "not-mine"}),
		testcontainers.WithWaitStrategy(wait.ForLog("x")),
	} {
		require.NoError(t, opt.Customize(&req))
	}
	hello := &helloStrategy{}
	configure(&req, cs, hello)
	assert.Equal(t, "runtimectl-s1", req.Name)
	assert.IsType(t, &wait.MultiStrategy{}, req.WaitingFor, "the caller's wait strategy runs with the hello")

	cfg := &container.Config{Image: "img:1", Labels: map[string]string{"team": "qa", "org.testcontainers": "true", contract.LabelSession: "not-mine"}}
	req.ConfigModifier(cfg)
	assert.Equal(t, wantCfg.Env, cfg.Env)
	assert.Equal(t, wantCfg.User, cfg.User)
	assert.Equal(t, wantCfg.WorkingDir, cfg.WorkingDir)
	assert.Equal(t, "s1", cfg.Labels[contract.LabelSession], "runtimectl's labels win")
	assert.Equal(t, "qa", cfg.Labels["team"])
	assert.Equal(t, "true", cfg.Labels["org.testcontainers"])

	hc := &container.HostConfig{Tmpfs: map[string]string{"/scratch": "size=1m"}}
	req.HostConfigModifier(hc)
	assert.Equal(t, wantHC.CapDrop, hc.CapDrop)
	assert.Equal(t, wantHC.CapAdd, hc.CapAdd)
	assert.Equal(t, wantHC.SecurityOpt, hc.SecurityOpt)
	assert.True(t, hc.ReadonlyRootfs)
	assert.Equal(t, wantHC.Resources.Memory, hc.Resources.Memory)
	assert.Equal(t, wantHC.Mounts, hc.Mounts)
	assert.Equal(t, wantHC.Tmpfs["/tmp"], hc.Tmpfs["/tmp"])
	assert.Equal(t, "size=1m", hc.Tmpfs["/scratch"], "the caller's tmpfs is kept")
	assert.Equal(t, int64(1<<20), hc.ShmSize, "the caller's HostConfigModifier runs after")
}

func TestLangOfRefKnowsRuntimectlsImages(t *testing.T) {
	assert.Equal(t, "bash", langOfRef(Image("bash")))
	assert.Equal(t, "python", langOfRef(Image("python")))
	assert.Equal(t, "", langOfRef("acme/python-ml:1"))
}
