package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
)

// Size is a byte count in JSON: a number of bytes or a Docker-style string ("512m", "2g").
type Size int64

// UnmarshalJSON accepts 536870912 or "512m".
func (s *Size) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 {
			return fmt.Errorf("size %d is negative", n)
		}
		*s = Size(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size %s: give a number of bytes or a string like \"512m\"", b)
	}
	v, err := units.RAMInBytes(str)
	if err != nil || v < 0 {
		return fmt.Errorf("size %q: use 512m, 2g or a number of bytes", str)
	}
	*s = Size(v)
	return nil
}

// Duration is a duration in JSON: a number of seconds (30, 0.5) or a Go duration string
// ("30s", "2m").
type Duration time.Duration

// UnmarshalJSON accepts 30, 0.5 or "2m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		if f < 0 {
			return fmt.Errorf("duration %v is negative", f)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("duration %s: give seconds as a number or a string like \"30s\"", b)
	}
	str = strings.TrimSpace(str)
	if f, err := strconv.ParseFloat(str, 64); err == nil && f >= 0 {
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(str)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: use 500ms, 30s, 2m or a number of seconds", str)
	}
	*d = Duration(v)
	return nil
}
