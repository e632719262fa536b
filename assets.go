// Package runtimectl holds the files that the images are built from (the Dockerfiles and the
// kernel drivers), embedded so that the runtimectl binary can build its images anywhere.
// The Go library is in the session package; the commands are in cmd/runtimectl.
package runtimectl

import "embed"

// Assets are the Dockerfiles (Dockerfile.<lang>, one per language in package lang) and kernels/
// of this repository. The pattern takes every language's Dockerfile, so adding a language does
// not touch this file.
//
//go:embed Dockerfile.* kernels
var Assets embed.FS
