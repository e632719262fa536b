// Package agent is the supervisor that runs inside every session container, under tini, as the
// container's main process (`runtime-agent serve`).
//
// It starts the language's kernel driver as the unprivileged session user (see
// docs/kernel-protocol.md), runs one request at a time in arrival order, captures the kernel's
// output at the file-descriptor level and streams it to the client that asked, keeps the
// history (history.jsonl) and the snapshots in the state directory on the session's volume,
// takes a snapshot in the background after every execution that may have changed the state, and
// brings a crashed, hung or out-of-memory kernel back from the latest good snapshot inside the
// same container.
//
// Faults it absorbs, each covered by an integration test (session/hostile_test.go): code that
// ignores SIGINT is killed after the grace; an interpreter that dies (exit, segfault, out of
// memory) is detected by its wait, not by polling, and brought back; ending a kernel ends every
// process of the session user (see killUser), background ones included; a container whose pids
// limit stays reached (a fork bomb) gets the same treatment, since no client could connect to
// it; a full volume does not lose the history (a reserve file is given up to record the
// execution, and what could not be written is said in the result and in notices); output is
// capped per execution and never reaches the container's log.
//
// Clients reach it through `runtime-agent connect`, started with `docker exec`: a private duplex
// stream per client, relayed to the agent's unix socket. That costs one exec to open (tens of
// milliseconds) where attaching to the agent's own stdio would cost one, but every attached
// client sees every frame and all clients share one stdin pipe, so concurrent writers could
// interleave frames; a private stream per client cannot mix two clients' requests or results,
// and a client that goes away closes only its own stream. The library keeps its stream open, so
// only the first request of a Session pays the exec.
//
// Inside, one run loop (Run, loop.go) owns the kernel, the snapshot scheduler and the request
// being served, and one select in it receives every event: a request, a kernel event, the
// kernel's exit, a snapshot's end, the watchdog tick (snapshot budget, pids limit, a done event
// that does not come), the execution's timeout, grace and interrupt, the agent's end. Small
// types each do one thing: the scheduler (schedule.go) is the snapshot bookkeeping and policy
// (a state that may differ from the last good snapshot stays unsaved until a later one is
// saved; a drain, and the agent's end, save it under either policy); the supervisor
// (supervise.go) brings a kernel up from the preferred or latest snapshot, passing over one
// that fails to load twice, then an empty state; an execution (exec.go) is one request's
// streams, caps, timers and result; what waits for a snapshot (drain, stop, restore, a kernel
// being replaced) is a continuation the scheduler runs when the snapshot ends, so the loop never
// waits anywhere else. The tests drive it in-process through a stub kernel driver
// (stub_test.go), no Docker.
//
// It imports contract, execproto, history, snapshot and lang; no Docker, no cobra.
package agent
