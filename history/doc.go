// Package history is the record format of a session's executions and the
// readers and exporters built on it.
//
// The runtime agent inside the container appends to
// /var/lib/runtimectl/history.jsonl (on the session's state volume,
// contract.StateDir) through a [Log]: a "start" record
// when an execution begins, an "end" record when it finishes, and later
// "state" records (what became of the interpreter state: snapshot saved,
// failed, restored after a crash) and "note" records. Each line is one
// JSON object with a "schema" field, written with one write call, so a
// crash can only leave a torn last line, which [Open] repairs. [Log.Append]
// fsyncs each record; [Log.AppendNoSync] leaves the fsync to a later
// [Log.Sync] (the agent writes an execution's records at once, before its
// result is sent, and fsyncs them just after: a killed container loses
// nothing, since the page cache is the host's).
//
// The controller reads the same file (copied out of the volume) with
// [Parse], which merges the records of each execution into an [Execution],
// and prints them with [WriteText], [WriteJSON], [WriteIPYNB] (a Jupyter
// notebook) or [WriteExecutorJSON] (MetaGPT's executor.json).
//
// Nothing here is trusted: Parse and Open report lines they cannot read
// instead of failing, never guess at their content, and never panic
// (FuzzParse checks that).
//
// Imports: the standard library only. No Docker, no cobra; tests may use
// testify.
package history
