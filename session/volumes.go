package session

import (
	"context"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/lang"
)

// VolumeList lists the sessions' volumes (workspace and state volume as one entry), with their
// sizes when withSize. A volume the engine cannot size (it gives up on a folder thousands of
// levels deep) is measured by a helper container of the session's image (engine.Measurer);
// its size stays unknown (-1) only when that fails too.
func (c *Client) VolumeList(ctx context.Context, withSize bool) ([]engine.Volume, error) {
	list, err := c.vol.List(ctx, withSize)
	m, ok := c.eng.(engine.Measurer)
	if err != nil || !withSize || !ok {
		return list, err // (only an engine with a Measurer measures what it cannot size)
	}
	for i, v := range list {
		if v.Size >= 0 {
			continue
		}
		names := []string{v.Name}
		if v.State != "" && v.State != v.Name {
			names = append(names, v.State)
		}
		image := ""
		if st, err := decodeSettings(v.Settings); err == nil {
			image = st.Image
		} else if l, err := lang.Get("python"); err == nil {
			image = l.Ref()
		}
		sizes, err := m.Measure(ctx, image, names)
		if err != nil {
			c.logger.Warn("measure volumes", "volume", v.Name, "err", err)
			continue
		}
		total := int64(0)
		for _, s := range sizes {
			if s < 0 {
				total = -1
				break
			}
			total += s
		}
		list[i].Size = total
	}
	return list, nil
}
