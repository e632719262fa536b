// Package runtimectl holds the files that the images are built from (the Dockerfiles and the
// kernel drivers), embedded so that the runtimectl binary can build its images anywhere.
// The Go library is in the session package; the commands are in cmd/runtimectl.
package runtimectl

import "embed"

// Assets are the Dockerfiles and kernels/ of this repository.
//
//go:embed Dockerfile.python Dockerfile.bash kernels
var Assets embed.FS
