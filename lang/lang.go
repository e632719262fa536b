// Package lang is the registry of session languages: for each, the kernel driver the agent
// starts and the Dockerfile its image is built from. Adding a language is a driver under
// kernels/, a Dockerfile, and one entry here; nothing else in the agent or the controller
// changes. Standard library only.
package lang

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// Lang describes one language.
type Lang struct {
	Name string
	// Kernel is the argv that the agent runs, as the session user, to start the driver.
	Kernel []string
	// Dockerfile is the image's Dockerfile at the top of the repository.
	Dockerfile string
	// Image is the repository of the image that runtimectl builds for it.
	Image string
	// Fingerprint: the agent hands the driver a state fingerprint file (RUNTIMECTL_STATE_FD, see
	// docs/kernel-protocol.md) and decides "changed" by comparing what the driver writes there.
	Fingerprint bool
}

var registry = map[string]Lang{
	"python": {Name: "python", Kernel: []string{"python3", "-X", "utf8", "/opt/runtimectl/kernels/python/kernel.py"}, Dockerfile: "Dockerfile.python", Image: "runtimectl/python"},
	"bash":   {Name: "bash", Kernel: []string{"bash", "--noprofile", "--norc", "/opt/runtimectl/kernels/bash/kernel.bash"}, Dockerfile: "Dockerfile.bash", Image: "runtimectl/bash", Fingerprint: true},
	"node":   {Name: "node", Kernel: []string{"node", "/opt/runtimectl/kernels/node/kernel.js"}, Dockerfile: "Dockerfile.node", Image: "runtimectl/node"},
}

// Get returns the language called name.
func Get(name string) (Lang, error) {
	l, ok := registry[name]
	if !ok {
		return Lang{}, fmt.Errorf("unknown language %q: choose one of %s", name, strings.Join(Names(), ", "))
	}
	return l, nil
}

// Names lists the languages, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultImageTag is the tag of the images runtimectl builds and starts by default.
const DefaultImageTag = "latest"

// ImageTag returns the tag of the images runtimectl builds and starts by default:
// DefaultImageTag, or $RUNTIMECTL_IMAGE_TAG when set, so that two checkouts on one engine (or a
// test run beside a working installation) do not replace each other's images.
func ImageTag() string {
	if t := os.Getenv("RUNTIMECTL_IMAGE_TAG"); t != "" {
		return t
	}
	return DefaultImageTag
}

// Ref returns the reference of the language's image: Image and ImageTag.
func (l Lang) Ref() string { return l.Image + ":" + ImageTag() }
