package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
)

// Size is a byte count in JSON: a number of bytes or a Docker-style string ("512m", "2g").
type Size int64

// UnmarshalJSON accepts 536870912 or "512m".
func (s *Size) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		switch {
		case f < 0:
			return fmt.Errorf("size %s is negative", b)
		case f >= math.MaxInt64:
			return fmt.Errorf("size %s is over the maximum of %d bytes", b, int64(math.MaxInt64))
		case f != math.Trunc(f):
			return fmt.Errorf("size %s is not a whole number of bytes", b)
		}
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			n = int64(f) // 1e9 and the like
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
		return d.fromSeconds(f, string(b))
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("duration %s: give seconds as a number or a string like \"30s\"", b)
	}
	str = strings.TrimSpace(str)
	if f, err := strconv.ParseFloat(str, 64); err == nil {
		return d.fromSeconds(f, strconv.Quote(str))
	}
	v, err := time.ParseDuration(str)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: use 500ms, 30s, 2m or a number of seconds (a Go duration holds at most 2562047h)", str)
	}
	if v > MaxDuration {
		return fmt.Errorf("duration %q is over the maximum of %s (a year); give less, or 0 for none", str, MaxDuration)
	}
	*d = Duration(v)
	return nil
}

// fromSeconds sets d to f seconds, refusing what a time.Duration cannot hold (1e30 used to
// come back as "invalid timeout -2562047h...").
func (d *Duration) fromSeconds(f float64, shown string) error {
	switch {
	case math.IsNaN(f) || f < 0:
		return fmt.Errorf("duration %s is negative", shown)
	case f*float64(time.Second) > float64(MaxDuration):
		return fmt.Errorf("duration of %s seconds is over the maximum of %.0f seconds (a year); give less, or 0 for none", shown, MaxDuration.Seconds())
	}
	*d = Duration(f * float64(time.Second))
	return nil
}
