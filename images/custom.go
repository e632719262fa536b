package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/pkg/jsonmessage"
)

// BuildFile builds an operator's own Dockerfile (usually FROM runtimectl/python:latest plus
// packages) with its folder as the context, and tags it. The result must carry the agent
// (inherited from runtimectl's image through its labels): an image that does not is refused
// for sessions, so BuildFile reports it at once.
func (b *Builder) BuildFile(ctx context.Context, dockerfile, tag string, progress io.Writer) (Image, error) {
	dir := filepath.Dir(dockerfile)
	tarball, err := tarDir(dir)
	if err != nil {
		return Image{}, fmt.Errorf("build %s: %w", dockerfile, err)
	}
	resp, err := b.api.ImageBuild(ctx, bytes.NewReader(tarball), build.ImageBuildOptions{
		Tags: []string{tag}, Dockerfile: filepath.Base(dockerfile), Remove: true, ForceRemove: true, Version: build.BuilderV1,
	})
	if err != nil {
		return Image{}, fmt.Errorf("build %s: %w", dockerfile, err)
	}
	defer resp.Body.Close()
	if progress == nil {
		progress = io.Discard
	}
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, progress, 0, false, nil); err != nil {
		return Image{}, fmt.Errorf("build %s: %w", dockerfile, err)
	}
	img, err := b.Inspect(ctx, tag)
	if err != nil {
		return img, fmt.Errorf("built %s, but %w: start the Dockerfile FROM runtimectl/python:latest (or runtimectl/bash:latest)", tag, err)
	}
	return img, nil
}

// tarDir makes a build context of dir (regular files and folders; links are refused).
func tarDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		if !info.IsDir() && !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file; the build context takes files and folders only", p)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
