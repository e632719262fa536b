package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

func newCmdImage(f *Factory) *cobra.Command {
	c := &cobra.Command{Use: "image", Short: "Build, list and remove the images sessions run"}
	c.AddCommand(newCmdImageBuild(f), newCmdImageLs(f), newCmdImageRm(f))
	return group(c)
}

func newCmdImageBuild(f *Factory) *cobra.Command {
	var (
		base, file, tag string
		force           bool
	)
	c := &cobra.Command{
		Use:   "build [python|bash|all] | build --file DOCKERFILE --tag REF",
		Short: "Build the interpreter images (skipped when their content has not changed)",
		Long: `Build runtimectl's images from Dockerfile.<lang>, the kernel drivers and the runtime-agent
binary, showing the build's progress on stderr. An image whose content hash (Dockerfile, drivers,
agent and base image) matches the existing one is not built again. The base image
(debian:bookworm-slim) must be in the local engine: where no registry can be reached, make it
with 'make base-image'. Prints the image references.`,
		Example: `  runtimectl image build
  runtimectl image build python --force
  runtimectl image build --file Dockerfile.ml --tag acme/python-ml   # FROM runtimectl/python:latest`,
		Args: args(0, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if file != "" || tag != "" {
				if file == "" || tag == "" || len(a) > 0 {
					return usagef("--file and --tag go together, without a language")
				}
				if _, err := os.Stat(file); err != nil {
					return usagef("--file %s: %v", file, err)
				}
				cl, err := f.Client()
				if err != nil {
					return err
				}
				if docker.From(cl).Images() == nil {
					return noImages(cl)
				}
				img, err := docker.From(cl).Images().BuildFile(c.Context(), file, tag, f.IO.Err)
				if err != nil {
					return err
				}
				fmt.Fprintf(f.IO.Err, "runtimectl: %s carries the agent (%s); start a session on it with --image %s\n", tag, img.Lang, tag)
				fmt.Fprintln(f.IO.Out, tag)
				return nil
			}
			which := "all"
			if len(a) == 1 {
				which = a[0]
			}
			var langs []lang.Lang
			if which == "all" {
				for _, n := range lang.Names() {
					l, _ := lang.Get(n)
					langs = append(langs, l)
				}
			} else {
				l, err := lang.Get(which)
				if err != nil {
					return usagef("%v, or all", err)
				}
				langs = append(langs, l)
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			if docker.From(cl).Images() == nil {
				return noImages(cl)
			}
			for _, l := range langs {
				ref, _, err := docker.From(cl).Images().Build(c.Context(), images.BuildOptions{Lang: l, Base: base, Progress: f.IO.Err, Force: force})
				if err != nil {
					return err
				}
				fmt.Fprintln(f.IO.Out, ref)
			}
			return nil
		},
	}
	c.Flags().StringVar(&base, "base", "", "base image (the Dockerfiles' BASE; default debian:bookworm-slim)")
	c.Flags().BoolVar(&force, "force", false, "build even when the content has not changed")
	c.Flags().StringVar(&file, "file", "", "build your own Dockerfile (its folder is the context), FROM runtimectl's image")
	c.Flags().StringVar(&tag, "tag", "", "the reference to give the image built with --file")
	return c
}

func newCmdImageLs(f *Factory) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "ls",
		Short:   "List the images that carry the runtimectl agent",
		Example: "  runtimectl image ls",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			if docker.From(cl).Images() == nil {
				return noImages(cl)
			}
			list, err := docker.From(cl).Images().List(c.Context())
			if err != nil {
				return err
			}
			sessions, err := cl.List(c.Context())
			if err != nil {
				return err
			}
			type row struct {
				images.Image
				Sessions []string `json:"sessions"`
			}
			rows := make([]row, 0, len(list))
			for _, im := range list {
				r := row{Image: im, Sessions: []string{}}
				for _, s := range sessions {
					for _, ref := range im.Refs {
						if s.Image == ref {
							r.Sessions = append(r.Sessions, s.Name)
						}
					}
				}
				rows = append(rows, r)
			}
			if asJSON {
				return writeJSON(f.IO.Out, rows)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REFERENCE\tLANG\tCONTENT\tSIZE\tCREATED\tSESSIONS")
			for _, im := range rows {
				h := im.Hash
				if len(h) > 12 {
					h = h[:12]
				}
				users := strings.Join(im.Sessions, ",")
				if users == "" {
					users = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", strings.Join(im.Refs, ","), im.Lang, h, humanSize(im.Size), ago(im.Created), users)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return c
}

func newCmdImageRm(f *Factory) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:               "rm REF",
		Short:             "Remove a runtime image (refused while a session uses it, unless --force)",
		Example:           "  runtimectl image rm runtimectl/bash:latest",
		Args:              args(1, 1),
		ValidArgsFunction: completeImages(f),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			if docker.From(cl).Images() == nil {
				return noImages(cl)
			}
			if !force {
				list, err := cl.List(c.Context())
				if err != nil {
					return err
				}
				var users []string
				for _, s := range list {
					if s.Image == a[0] {
						users = append(users, s.Name)
					}
				}
				if len(users) > 0 {
					return fmt.Errorf("image %s is used by session(s) %s; remove them first or use --force", a[0], strings.Join(users, ", "))
				}
			}
			err = docker.From(cl).Images().Remove(c.Context(), a[0], force)
			if errors.Is(err, images.ErrNotFound) {
				return fmt.Errorf("%v; see `runtimectl image ls`", err)
			}
			return err
		},
	}
	c.Flags().BoolVar(&force, "force", false, "remove even while sessions use it")
	return c
}

// noImages is the error of the image commands on an engine that builds no images.
func noImages(cl *session.Client) error {
	return fmt.Errorf("the %s backend builds no images: build them on Docker (`runtimectl image build`), push them to a registry the cluster pulls from, and name them with `session start --image` (docs/kubernetes.md)", cl.Backend())
}
