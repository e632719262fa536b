package containers

import (
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/stretchr/testify/assert"
)

func TestEngineNameComesFromTheServersComponents(t *testing.T) {
	for _, tc := range []struct {
		components []string
		want       string
	}{
		{[]string{"Engine", "containerd", "runc", "docker-init"}, "Docker"},
		{[]string{"Podman Engine", "Conmon", "OCI Runtime (runc)"}, "Podman"},
		{nil, "Docker"},
	} {
		var v types.Version
		for _, c := range tc.components {
			v.Components = append(v.Components, types.ComponentVersion{Name: c})
		}
		assert.Equal(t, tc.want, engineName(v), "%v", tc.components)
	}
}
