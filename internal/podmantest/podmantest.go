// Package podmantest runs Podman's API service for the tests, rootful or rootless, on a socket
// and storage of its own under a temporary directory, with the session images loaded from the
// Docker engine (`docker save | podman load`). Everything it starts and creates (the service,
// its conmon processes, the rootless user, the storage) is stopped and removed at the end of the
// test. It needs root and Debian's podman, catatonit and uidmap (scripts/test-deps.sh installs them).
package podmantest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Service is a running Podman API service.
type Service struct {
	Host     string // unix://... for DOCKER_HOST or docker.New
	Rootless bool
	User     string // the unprivileged user that runs a rootless service
	dir      string
	cmd      *exec.Cmd
}

// Need fails the test when what Podman needs is missing, naming what to install.
func Need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Podman (skipped under -short)")
	}
	var missing []string
	for _, b := range []string{"podman", "newuidmap", "runuser", "useradd", "docker"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if !exists("/usr/libexec/podman/catatonit") { // Podman's init_path
		missing = append(missing, "catatonit")
	}
	if len(missing) > 0 {
		t.Fatalf("the Podman tests need %s: apt-get install podman catatonit uidmap (scripts/test-deps.sh, which make test runs, does)", strings.Join(missing, ", "))
	}
	if os.Getuid() != 0 {
		t.Fatal("the Podman tests need root: they start a rootful service and create a user for the rootless one")
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Rootful starts `podman system service` as root with its own storage, loads images into it
// and registers its teardown.
func Rootful(t testing.TB, images ...string) *Service {
	t.Helper()
	Need(t)
	dir := t.TempDir()
	s := &Service{dir: dir, Host: "unix://" + filepath.Join(dir, "podman.sock")}
	t.Cleanup(s.teardown(t))
	for _, im := range images {
		s.load(t, im)
	}
	s.start(t, s.podman("system", "service", "--time=0", s.Host))
	return s
}

// Rootless creates an unprivileged user (home, subordinate ids, overlay storage), starts its
// `podman system service`, loads images into its storage and registers the teardown, which
// removes the user again.
func Rootless(t testing.TB, images ...string) *Service {
	t.Helper()
	Need(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	user := "rtpm" + hex.EncodeToString(b)
	dir, err := os.MkdirTemp("", "runtimectl-podman-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{dir: dir, Rootless: true, User: user, Host: "unix://" + filepath.Join(dir, "xdg", "podman.sock")}
	t.Cleanup(s.teardown(t))
	run(t, "useradd", "-m", "-d", filepath.Join(dir, "home"), "-s", "/bin/bash", user)
	if sub, _ := os.ReadFile("/etc/subuid"); !bytes.Contains(sub, []byte(user+":")) {
		t.Fatalf("useradd gave %s no subordinate ids in /etc/subuid (rootless Podman needs them)", user)
	}
	for _, d := range []string{dir, filepath.Join(dir, "xdg"), filepath.Join(dir, "home", ".config", "containers")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Native overlay works unprivileged on kernels from 5.13; Podman would otherwise pick vfs,
	// which copies the whole image for every container.
	if err := os.WriteFile(filepath.Join(dir, "home", ".config", "containers", "storage.conf"), []byte("[storage]\ndriver = \"overlay\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // MkdirTemp made it 0700; the user must get through
		t.Fatal(err)
	}
	run(t, "chown", "-R", user+":"+user, filepath.Join(dir, "home"), filepath.Join(dir, "xdg"))
	if err := os.Chmod(filepath.Join(dir, "xdg"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, im := range images {
		s.load(t, im)
	}
	s.start(t, s.podman("system", "service", "--time=0", s.Host))
	return s
}

// podman returns a podman command for this service's storage: root's own under dir, or run as
// the rootless user with its home and runtime directory.
func (s *Service) podman(args ...string) *exec.Cmd {
	if s.Rootless {
		env := []string{"HOME=" + filepath.Join(s.dir, "home"), "XDG_RUNTIME_DIR=" + filepath.Join(s.dir, "xdg"), "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		return exec.Command("runuser", append([]string{"-u", s.User, "--", "env", "-i"}, append(env, append([]string{"podman"}, args...)...)...)...)
	}
	global := []string{"--root", filepath.Join(s.dir, "root"), "--runroot", filepath.Join(s.dir, "run"),
		"--tmpdir", filepath.Join(s.dir, "tmp"), "--cgroup-manager", "cgroupfs", "--events-backend", "file"}
	return exec.Command("podman", append(global, args...)...)
}

// Podman runs a podman command against this service's storage (such as `kill NAME`).
func (s *Service) Podman(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.podman(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// load copies an image from the Docker engine: docker save | podman load.
func (s *Service) load(t testing.TB, image string) {
	t.Helper()
	save := exec.Command("docker", "save", image)
	load := s.podman("load", "-q")
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	load.Stdin = pipe
	var out bytes.Buffer
	load.Stdout, load.Stderr = &out, &out
	save.Stderr = &out
	if err := save.Start(); err != nil {
		t.Fatal(err)
	}
	lerr := load.Run()
	serr := save.Wait()
	if lerr != nil || serr != nil {
		t.Fatalf("docker save %s | podman load: %v %v\n%s", image, serr, lerr, out.String())
	}
}

// start runs the service in its own process group and waits for its socket.
func (s *Service) start(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	log, err := os.Create(filepath.Join(s.dir, "service.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start podman system service: %v", err)
	}
	s.cmd = cmd
	sock := strings.TrimPrefix(s.Host, "unix://")
	for i := 0; i < 150; i++ {
		if exists(sock) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(log.Name())
	t.Fatalf("podman system service made no socket at %s in 15 s:\n%s", sock, b)
}

// teardown stops the service, every conmon and container process of this storage (found by the
// directory in their command lines, all started here), the rootless user's pause process, and
// removes the storage and the user.
func (s *Service) teardown(t testing.TB) func() {
	return func() {
		_ = s.podman("rm", "-af", "-t", "0").Run()
		if s.cmd != nil && s.cmd.Process != nil {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
			_ = s.cmd.Wait()
		}
		for _, pid := range processesMentioning(s.dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if s.Rootless {
			if b, err := os.ReadFile(filepath.Join(s.dir, "xdg", "libpod", "tmp", "pause.pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		unmountUnder(s.dir)
		if s.Rootless {
			if out, err := exec.Command("userdel", "-r", s.User).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("does not exist")) {
				t.Logf("userdel %s: %v %s", s.User, err, out)
			}
		}
		if err := os.RemoveAll(s.dir); err != nil {
			t.Logf("remove %s: %v", s.dir, err)
		}
	}
}

// processesMentioning returns the processes whose command line contains dir.
func processesMentioning(dir string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder lazily unmounts every mount below dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir) {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// String names the service for test output.
func (s *Service) String() string {
	if s.Rootless {
		return fmt.Sprintf("rootless Podman (user %s) at %s", s.User, s.Host)
	}
	return "rootful Podman at " + s.Host
}
