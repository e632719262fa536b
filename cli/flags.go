package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/runtimectl/runtimectl/execproto"
)

const protocolVersion = execproto.Version

// durationValue is a Go duration flag where a bare number means seconds.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v durationValue) Type() string { return "duration" }

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 {
			return 0, fmt.Errorf("duration %q is negative", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: use 500ms, 30s, 2m or a number of seconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// sizeValue is a Docker-style size flag (512m, 2g).
type sizeValue struct{ n *int64 }

func (v sizeValue) String() string {
	if v.n == nil || *v.n == 0 {
		return ""
	}
	return units.BytesSize(float64(*v.n))
}

func (v sizeValue) Set(s string) error {
	n, err := units.RAMInBytes(s)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a size: use 512m, 2g or a number of bytes", s)
	}
	*v.n = n
	return nil
}

func (v sizeValue) Type() string { return "size" }
