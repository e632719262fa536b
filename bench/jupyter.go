package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/images"
)

// JupyterImage is the comparison image: runtimectl's python image plus Debian's ipykernel and
// jupyter_client. It is built once and reused by tag.
var JupyterImage = "runtimectl-bench/jupyter:" + images.Tag()

// jupyterDockerfile adds the Jupyter packages to the session image. The image's ENTRYPOINT is
// the runtimectl agent, so it is reset.
var jupyterDockerfile = `FROM ` + PythonImage + `
USER root
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-ipykernel python3-jupyter-client \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
ENTRYPOINT []
CMD ["sleep", "infinity"]
`

// jupyterDriver runs inside the Jupyter container: it starts a kernel with jupyter_client,
// warms it up, prints "ready <kernel start seconds>", then for each line N on stdin prints a
// JSON list of N round trips of execute('x = 1') in seconds (from the request to both the
// execute_reply and the idle status), and stops on "q" or EOF.
const jupyterDriver = `
import json, sys, time
from jupyter_client import KernelManager
t0 = time.perf_counter()
km = KernelManager(kernel_name="python3")
km.start_kernel()
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=120)
start = time.perf_counter() - t0

def once():
    t = time.perf_counter()
    mid = kc.execute("x = 1", store_history=False)
    reply = idle = False
    while not reply:
        m = kc.get_shell_msg(timeout=30)
        reply = m["parent_header"].get("msg_id") == mid
    while not idle:
        m = kc.get_iopub_msg(timeout=30)
        idle = (m["parent_header"].get("msg_id") == mid and m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle")
    return time.perf_counter() - t

for _ in range(50):
    once()
print("ready %.6f" % start, flush=True)
for line in sys.stdin:
    line = line.strip()
    if not line or line == "q":
        break
    print(json.dumps([once() for _ in range(int(line))]), flush=True)
kc.stop_channels()
km.shutdown_kernel(now=True)
`

// Jupyter drives the driver script in a Jupyter container.
type Jupyter struct {
	es    *ExecStream
	r     *bufio.Reader
	Start time.Duration // the kernel's start, as jupyter_client saw it
}

// EnsureJupyterImage builds the Jupyter image unless it exists.
func EnsureJupyterImage(ctx context.Context, d *Docker, progress io.Writer) (built bool, err error) {
	if d.ImageExists(ctx, JupyterImage) {
		return false, nil
	}
	return true, d.BuildImage(ctx, JupyterImage, jupyterDockerfile, progress)
}

// StartJupyter starts the driver (and so the kernel) in container id and waits until it is
// warm.
func StartJupyter(ctx context.Context, d *Docker, id string) (*Jupyter, error) {
	es, err := d.Exec(ctx, id, []string{"python3", "-u", "-c", jupyterDriver}, "1000:1000", true)
	if err != nil {
		return nil, err
	}
	j := &Jupyter{es: es, r: bufio.NewReader(es)}
	line, err := j.r.ReadString('\n')
	if err != nil {
		es.Close()
		return nil, fmt.Errorf("jupyter driver: %v (stderr: %s)", err, lastLines(es.Stderr.String(), 5))
	}
	secs, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if !ok {
		es.Close()
		return nil, fmt.Errorf("jupyter driver said %q", line)
	}
	f, _ := strconv.ParseFloat(secs, 64)
	j.Start = time.Duration(f * float64(time.Second))
	return j, nil
}

// RoundTrips runs n round trips and returns them in milliseconds.
func (j *Jupyter) RoundTrips(n int) ([]float64, error) {
	if _, err := fmt.Fprintf(j.es, "%d\n", n); err != nil {
		return nil, err
	}
	line, err := j.r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("jupyter driver: %v (stderr: %s)", err, lastLines(j.es.Stderr.String(), 5))
	}
	var secs []float64
	if err := json.Unmarshal([]byte(line), &secs); err != nil {
		return nil, fmt.Errorf("jupyter driver said %q", line)
	}
	for i := range secs {
		secs[i] *= 1000
	}
	return secs, nil
}

// Close stops the kernel and the driver.
func (j *Jupyter) Close() {
	_, _ = io.WriteString(j.es, "q\n")
	_ = j.es.CloseWrite()
	_, _ = io.Copy(io.Discard, j.es)
	j.es.Close()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
