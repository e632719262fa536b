// Package images builds, lists and removes the images that sessions run, through the Docker
// API. An image is usable for sessions only if it carries the runtimectl agent, which the
// build records in a label (contract.LabelAgent); the build also records a hash of its whole
// context, so that an image whose content has not changed is not built again.
//
// It is part of the Docker engine (package docker, which checks sessions' images with it for
// the library, engine.ImageChecker, and hands it to `runtimectl image` and tcsession); with
// containers and volumes it is where the Docker SDK is imported. Its exported types are the
// project's own, its errors engine's. Imports: the Docker SDK, engine, contract, lang.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/lang"
)

// API is the subset of the Docker client that this package uses.
type API interface {
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error)
}

// DefaultBase is the base image of the Dockerfiles (their ARG BASE).
const DefaultBase = "debian:bookworm-slim"

// DefaultTag is the tag of the images runtimectl builds.
const DefaultTag = lang.DefaultImageTag

// Tag returns the tag of the images runtimectl builds and starts by default (lang.ImageTag).
func Tag() string { return lang.ImageTag() }

// Ref returns the image reference for a language (lang.Lang.Ref).
func Ref(l lang.Lang) string { return l.Ref() }

// The engine's errors, as this package returns them.
var (
	// ErrNotFound is returned for an image that does not exist.
	ErrNotFound = engine.Described(engine.ErrNotFound, "no such image")
	// ErrNoAgent is returned for an image that does not carry the runtimectl agent.
	ErrNoAgent = engine.ErrNoAgent
)

// Image is what runtimectl shows of an image.
type Image struct {
	ID      string    `json:"id"`
	Refs    []string  `json:"refs"`
	Lang    string    `json:"lang"`
	Hash    string    `json:"content_hash"`
	Size    int64     `json:"size_bytes"`
	Created time.Time `json:"created"`
	Agent   bool      `json:"agent"`
}

// Builder builds images from the embedded assets and the agent binary.
type Builder struct {
	api    API
	assets fs.FS
	// Agent returns the path of a static runtime-agent binary for linux.
	Agent func(ctx context.Context) (string, error)
	// Egress returns the path of a static runtime-egress binary for linux (the egress proxy of
	// sessions with allowed hosts runs from the session's image).
	Egress func(ctx context.Context) (string, error)
}

// New returns a Builder. assets holds Dockerfile.<lang> and kernels/.
func New(api API, assets fs.FS) *Builder {
	return &Builder{api: api, assets: assets, Agent: FindAgent, Egress: FindEgress}
}

// BuildOptions say what to build.
type BuildOptions struct {
	Lang lang.Lang
	// Base overrides the Dockerfile's BASE argument; "" keeps debian:bookworm-slim.
	Base string
	// Progress receives the build's progress (Docker's messages), or nil.
	Progress io.Writer
	// Force builds even when an image with the same content hash exists.
	Force bool
}

// Build builds the language's image unless one with the same content hash exists. It returns
// the reference and whether it built.
func (b *Builder) Build(ctx context.Context, o BuildOptions) (string, bool, error) {
	ref := Ref(o.Lang)
	base := o.Base
	if base == "" {
		base = DefaultBase
	}
	baseImg, err := b.api.ImageInspect(ctx, base)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", false, fmt.Errorf("build %s: the base image %s is not in the local engine and runtimectl does not pull; make it with `make base-image` (debootstrap from Debian's packages) or `docker pull %s`", ref, base, base)
		}
		return "", false, fmt.Errorf("build %s: inspect base image: %w", ref, err)
	}
	agentPath, err := b.Agent(ctx)
	if err != nil {
		return "", false, fmt.Errorf("build %s: %w", ref, err)
	}
	files, err := b.contextFiles(o.Lang, agentPath)
	if err != nil {
		return "", false, fmt.Errorf("build %s: %w", ref, err)
	}
	if files, err = b.withEgress(ctx, files); err != nil {
		return "", false, fmt.Errorf("build %s: %w", ref, err)
	}
	hash := contentHash(files, baseImg.ID)
	if !o.Force {
		if cur, err := b.api.ImageInspect(ctx, ref); err == nil && cur.Config != nil && cur.Config.Labels[contract.LabelHash] == hash {
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "%s is up to date (content %s)\n", ref, hash[:12])
			}
			return ref, false, nil
		}
	}
	tarball, err := tarFiles(files)
	if err != nil {
		return "", false, err
	}
	buildArgs := map[string]*string{"BASE": &base}
	resp, err := b.api.ImageBuild(ctx, bytes.NewReader(tarball), build.ImageBuildOptions{
		Tags:        []string{ref},
		Dockerfile:  o.Lang.Dockerfile,
		BuildArgs:   buildArgs,
		Labels:      map[string]string{contract.LabelHash: hash, contract.LabelAgent: "1", contract.LabelLang: o.Lang.Name},
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return "", false, fmt.Errorf("build %s: %w", ref, err)
	}
	defer resp.Body.Close()
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, progress, 0, false, nil); err != nil {
		return "", false, fmt.Errorf("build %s: %w", ref, err)
	}
	return ref, true, nil
}

type file struct {
	name string
	data []byte
	mode int64
}

func (b *Builder) contextFiles(l lang.Lang, agentPath string) ([]file, error) {
	var files []file
	df, err := fs.ReadFile(b.assets, l.Dockerfile)
	if err != nil {
		return nil, fmt.Errorf("no %s among the assets: %w", l.Dockerfile, err)
	}
	files = append(files, file{name: l.Dockerfile, data: df, mode: 0o644})
	dir := "kernels/" + l.Name
	err = fs.WalkDir(b.assets, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		base := path.Base(p)
		if strings.HasPrefix(base, "test_") || strings.HasSuffix(base, ".pyc") {
			return nil
		}
		data, err := fs.ReadFile(b.assets, p)
		if err != nil {
			return err
		}
		files = append(files, file{name: p, data: data, mode: 0o644})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read kernel driver %s: %w", dir, err)
	}
	agent, err := os.ReadFile(agentPath)
	if err != nil {
		return nil, fmt.Errorf("read agent binary: %w", err)
	}
	files = append(files, file{name: "runtime-agent", data: agent, mode: 0o755})
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}

func contentHash(files []file, baseID string) string {
	h := sha256.New()
	fmt.Fprintf(h, "base %s\n", baseID)
	for _, f := range files {
		fmt.Fprintf(h, "%s %o %d\n", f.name, f.mode, len(f.data))
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func tarFiles(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Inspect returns the image ref; ErrNotFound when missing, ErrNoAgent when it is not a
// runtimectl image.
func (b *Builder) Inspect(ctx context.Context, ref string) (Image, error) {
	r, err := b.api.ImageInspect(ctx, ref)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return Image{}, fmt.Errorf("%w: %s", ErrNotFound, ref)
		}
		return Image{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	img := Image{ID: r.ID, Refs: r.RepoTags, Size: r.Size}
	img.Created, _ = time.Parse(time.RFC3339Nano, r.Created)
	if r.Config != nil {
		img.Lang = r.Config.Labels[contract.LabelLang]
		img.Hash = r.Config.Labels[contract.LabelHash]
		img.Agent = r.Config.Labels[contract.LabelAgent] == "1"
	}
	if !img.Agent {
		return img, fmt.Errorf("%w: %s", ErrNoAgent, ref)
	}
	return img, nil
}

// List returns the images that carry the agent.
func (b *Builder) List(ctx context.Context) ([]Image, error) {
	list, err := b.api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", contract.LabelAgent+"=1"))})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]Image, 0, len(list))
	for _, s := range list {
		out = append(out, Image{
			ID: s.ID, Refs: s.RepoTags, Lang: s.Labels[contract.LabelLang], Hash: s.Labels[contract.LabelHash],
			Size: s.Size, Created: time.Unix(s.Created, 0), Agent: true,
		})
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i].Refs, ",") < strings.Join(out[j].Refs, ",") })
	return out, nil
}

// Remove removes an image.
func (b *Builder) Remove(ctx context.Context, ref string, force bool) error {
	if _, err := b.api.ImageRemove(ctx, ref, image.RemoveOptions{Force: force, PruneChildren: true}); err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("%w: %s", ErrNotFound, ref)
		}
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}
