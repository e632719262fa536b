package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/volumes"
)

// pools keeps warm pools on Docker: each pool's settings in the labels of an empty volume
// of its own (runtimectl_pool-NAME), a claim as a container rename and new volumes bound to the
// member's.
type pools struct {
	ctr *containers.Manager
	vol *volumes.Manager
}

func poolVolume(name string) string { return "runtimectl_pool-" + name }

func (d pools) SavePool(ctx context.Context, name, config string) error {
	api := d.vol.API()
	if err := api.VolumeRemove(ctx, poolVolume(name), false); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("replace pool %s: %w", name, err)
	}
	_, err := api.VolumeCreate(ctx, volume.CreateOptions{Name: poolVolume(name), Labels: map[string]string{
		contract.LabelPool: name, contract.LabelRole: contract.RolePool, contract.LabelPoolConfig: config,
		contract.LabelSchema: contract.LabelsSchema,
	}})
	if err != nil {
		return fmt.Errorf("create pool %s: %w", name, err)
	}
	return nil
}

func (d pools) LoadPools(ctx context.Context) ([]string, error) {
	r, err := d.vol.API().VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", contract.LabelRole+"="+contract.RolePool))})
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	out := make([]string, 0, len(r.Volumes))
	for _, v := range r.Volumes {
		out = append(out, v.Labels[contract.LabelPoolConfig])
	}
	return out, nil
}

func (d pools) DeletePool(ctx context.Context, name string) error {
	if err := d.vol.API().VolumeRemove(ctx, poolVolume(name), false); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove pool %s: %w", name, err)
	}
	return nil
}

// Adopt renames the member's container to the session's name (Docker refuses a name in use:
// no session is overwritten) and creates the session's volumes as binds of the member's. When
// the volumes cannot be made, the renamed container and what was made of them are removed.
func (d pools) Adopt(ctx context.Context, member, name, settings string) error {
	st, err := contract.DecodeSettings(settings)
	if err != nil {
		return err
	}
	if err := d.ctr.Rename(ctx, member, name); err != nil {
		return err
	}
	if _, err = d.vol.CreateBound(ctx, name, st.Lang, settings, member); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = d.ctr.Remove(cctx, name, true)
		_ = d.vol.RemoveSession(cctx, name) // the bound volumes, and the member's with them
	}
	return err
}
