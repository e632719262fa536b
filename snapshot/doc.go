// Package snapshot is the on-volume format of interpreter snapshots and the
// store that writes, checks, lists and prunes them.
//
// A snapshot is two files in the session's state directory
// (/var/lib/runtimectl, the session's state volume, contract.StateDir):
//
//	snapdata/<id>.snap   the bytes that the language driver wrote (a pickle,
//	                     a bash script), exactly as it wrote them
//	snapshots/<id>.json  its [Manifest]: the execution it follows (seq), the
//	                     size and CRC-32C of the data, the names kept and
//	                     skipped
//
// The manifest is written last, so a snapshot exists only once its data is
// complete and durable: [Writer.Commit] fsyncs the data, renames it into
// place, fsyncs the directory, then does the same for the manifest. A crash
// at any point leaves either the previous set of snapshots or the new one,
// plus temporary or orphan files that [OpenStore] removes. [Store.Open]
// checks size and checksum before handing the data out, and
// [Store.OpenLatestGood] falls back to the previous good snapshot, naming
// the bad ones.
//
// The agent is the only writer, and one [Store] per directory at a time. The
// controller reads manifests from the tar stream that the engine gives for
// the snapshots directory ([ManifestsFromTar]).
//
// stream.go reads the fd-5 chunk stream of the kernel protocol
// (docs/kernel-protocol.md): data chunks, the terminator chunk, then the
// driver's manifest chunk ([KernelManifest]).
//
// Imports: the standard library only. No Docker, no cobra; tests may use
// testify.
package snapshot
