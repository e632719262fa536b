package agent

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// killUser sends SIGKILL to every process of the session user in the container: the
// interpreter, whatever it started, processes that left its process group (setsid, a daemon),
// and every copy of a fork bomb. It is one kill(-1) made with the session user's credentials,
// which the kernel applies to all of that user's processes in the container's pid namespace at
// once, so a process that forks during the kill cannot escape it (a sweep of /proc could be
// outrun). Processes of other users (the agent, tini, relays) are out of its reach.
//
// Credentials on Linux belong to a thread: the raw setresuid below changes only the locked OS
// thread that makes the call (Go's syscall.Setresuid would change every thread of the agent).
// The saved uid stays 0, so the thread can take root back; if it could not, the goroutine ends
// still locked and the runtime throws the thread away.
func killUser(uid int) {
	if uid <= 0 {
		return // the kernel runs as the agent's own user (tests): its process group is all
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(uid), uintptr(uid), 0); e != 0 {
			runtime.UnlockOSThread()
			return
		}
		_ = syscall.Kill(-1, syscall.SIGKILL)
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, 0, 0, 0); e == 0 {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// pidsUsage returns the number of tasks (processes and threads) in the container's cgroup and
// its limit; ok is false when there is no limit or the cgroup cannot be read.
func pidsUsage() (cur, limit int64, ok bool) {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/pids"} {
		c, err1 := os.ReadFile(dir + "/pids.current")
		m, err2 := os.ReadFile(dir + "/pids.max")
		if err1 != nil || err2 != nil {
			continue
		}
		cur, err1 = strconv.ParseInt(strings.TrimSpace(string(c)), 10, 64)
		limit, err2 = strconv.ParseInt(strings.TrimSpace(string(m)), 10, 64) // "max": no limit
		return cur, limit, err1 == nil && err2 == nil && limit > 0
	}
	return 0, 0, false
}

// pidsHeadroom is how many tasks must stay free under the container's pids limit for the
// session to be reachable: `docker exec` of a relay and its Go runtime need a few.
const pidsHeadroom = 8

// pidsGrace is how long the limit may stay reached before the agent ends the session's
// processes: a fork bomb, or a workload that leaves no room to connect to the session.
const pidsGrace = 3 * time.Second

// pidsWatch notices a container whose pids limit stays reached: while it is, no client can
// connect (docker exec cannot start a process) and the code cannot fork.
type pidsWatch struct {
	fullSince time.Time
	lastCheck time.Time
	limit     int64
}

// exhausted reports whether the limit has been reached for longer than pidsGrace. It reads the
// cgroup at most every 250 ms.
func (w *pidsWatch) exhausted() bool {
	now := time.Now()
	if now.Sub(w.lastCheck) < 250*time.Millisecond {
		return !w.fullSince.IsZero() && now.Sub(w.fullSince) > pidsGrace
	}
	w.lastCheck = now
	cur, limit, ok := pidsUsage()
	if !ok || cur < limit-pidsHeadroom {
		w.fullSince = time.Time{}
		return false
	}
	w.limit = limit
	if w.fullSince.IsZero() {
		w.fullSince = now
	}
	return now.Sub(w.fullSince) > pidsGrace
}

// reset forgets a reached limit once the processes were killed.
func (w *pidsWatch) reset() { w.fullSince = time.Time{} }

func (w *pidsWatch) reason() string {
	return fmt.Sprintf("the session's processes filled its process limit (%d, --pids) for %s (a fork bomb?): every process of the session was killed and the interpreter restarted",
		w.limit, pidsGrace)
}

// reserveThreads makes the Go runtime create n OS threads now and keep them idle, so that the
// agent never needs a new thread while the container's pids limit is full. Without it, a fork
// bomb that fills the limit kills the agent itself: the runtime throws "failed to create new OS
// thread" the first time a blocking system call (an fsync, a read of the cgroup) needs one more
// thread than it has, and the whole container restarts instead of the agent ending the bomb.
//
// Each goroutine locks itself to a thread and waits until all of them have, so the runtime must
// start n distinct threads; unlocking before they return hands the threads back to the
// runtime's pool of idle threads, which it reuses and never shrinks.
func reserveThreads(n int) {
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	release := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			ready.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()
}

// threadReserve is how many threads the agent keeps for itself under a pids limit of limit
// (0: none): enough for every blocking system call it may make at once, and never more than a
// quarter of the limit so the session's code keeps most of it.
func threadReserve(limit int64) int {
	n := int64(16)
	if limit > 0 && n > limit/4 {
		n = limit / 4
	}
	return int(n)
}
