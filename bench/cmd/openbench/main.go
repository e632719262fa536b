// Command openbench measures what opening a private stream to a process in a running
// container costs through the Docker API, the part of `runtimectl session exec` that a
// library client pays once: a new exec (ContainerExecCreate + ContainerExecAttach +
// ContainerExecStart, as containers.Dial does), against attaching to the container's main
// process (ContainerAttach), each timed to the first byte echoed back by `cat`, interleaved.
//
//	go run ./bench/cmd/openbench -n 40 -image debian:bookworm-slim
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

func main() {
	n := flag.Int("n", 40, "rounds")
	image := flag.String("image", "debian:bookworm-slim", "an image with cat")
	flag.Parse()
	ctx := context.Background()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	check(err)
	c, err := cli.ContainerCreate(ctx, &container.Config{
		Image: *image, Cmd: []string{"cat"}, OpenStdin: true, AttachStdin: true, AttachStdout: true,
		Labels: map[string]string{"io.runtimectl.bench": "openbench"},
	}, &container.HostConfig{NetworkMode: "none", AutoRemove: false}, nil, nil, "")
	check(err)
	defer cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	check(cli.ContainerStart(ctx, c.ID, container.StartOptions{}))

	var execs, attaches []float64
	for i := 0; i < *n; i++ {
		for k := 0; k < 2; k++ {
			if (i+k)%2 == 0 {
				execs = append(execs, timeExec(ctx, cli, c.ID))
			} else {
				attaches = append(attaches, timeAttach(ctx, cli, c.ID))
			}
		}
	}
	report("new exec (create+attach+start) to first echo", execs)
	report("attach to the main process to first echo", attaches)
}

func timeExec(ctx context.Context, cli *client.Client, id string) float64 {
	t := time.Now()
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"cat"}, AttachStdin: true, AttachStdout: true})
	check(err)
	hj, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	check(err)
	defer hj.Close()
	echo(hj.Conn, hj.Reader)
	d := time.Since(t)
	_ = hj.CloseWrite()
	return ms(d)
}

func timeAttach(ctx context.Context, cli *client.Client, id string) float64 {
	t := time.Now()
	hj, err := cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true})
	check(err)
	defer hj.Close()
	echo(hj.Conn, hj.Reader)
	return ms(time.Since(t))
}

// echo writes a line and reads it back through Docker's stream headers (no TTY).
func echo(w io.Writer, r io.Reader) {
	msg := []byte("ping\n")
	_, err := w.Write(msg)
	check(err)
	var got []byte
	var h [8]byte
	for !bytes.Contains(got, msg) {
		_, err := io.ReadFull(r, h[:])
		check(err)
		b := make([]byte, binary.BigEndian.Uint32(h[4:]))
		_, err = io.ReadFull(r, b)
		check(err)
		got = append(got, b...)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func report(name string, v []float64) {
	sort.Float64s(v)
	fmt.Printf("%-48s p50 %6.1f ms  p90 %6.1f ms  n %d\n", name, v[len(v)/2], v[len(v)*9/10], len(v))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "openbench:", err)
		os.Exit(1)
	}
}
