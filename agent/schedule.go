package agent

import (
	"time"

	"github.com/runtimectl/runtimectl/contract"
)

// scheduler is the snapshot bookkeeping, in one place: which state is saved, which is not,
// and the one snapshot being written. The policy it carries out: every execution that ran user
// code may have changed the state, unless its driver proves otherwise ("changed": false, which
// drivers say only for code that provably ran nothing: empty code, a comment, a literal, a
// plain name); a state that may differ from the last good snapshot is "dirty" until a snapshot
// taken after it is saved, whatever failed in between. It is owned by the agent's run loop.
type scheduler struct {
	policy contract.SnapshotPolicy

	// dirty is the latest execution whose effects no saved snapshot holds, 0 when the live
	// state is the saved one. A snapshot that fails leaves it set.
	dirty int64
	// failed is the dirty mark that a snapshot already failed to save: the automatic policy
	// does not retry it in a loop (the next change, or a drain, tries again).
	failed int64

	// book is the latest execution that changed only the interpreter's own bookkeeping (IPython's
	// In, Out, _: a cell that showed a variable), 0 when no such change is unsaved. The automatic
	// policy takes no snapshot for it; a drain does, so a stop keeps it.
	book int64

	savedSeq int64
	savedID  string

	inflight *inflight
}

// ran records an execution that ended: changed is the driver's word that the state may differ.
func (s *scheduler) ran(seq int64, changed bool) {
	if changed {
		s.dirty = seq
	}
}

// touched records an execution that changed nothing but the driver's bookkeeping.
func (s *scheduler) touched(seq int64) { s.book = seq }

// isDirty reports whether the live state may differ from the latest saved snapshot.
func (s *scheduler) isDirty() bool { return s.dirty > 0 }

// autoDue reports whether the automatic policy wants a snapshot now: something unsaved that has
// not already failed, and none being written.
func (s *scheduler) autoDue() bool {
	return s.policy == contract.SnapshotEvery && s.inflight == nil && s.dirty > 0 && s.dirty != s.failed
}

// drainDue reports whether a drain (stop, gc, upgrade) must take a snapshot: anything unsaved,
// under either policy, failed before or not.
func (s *scheduler) drainDue() bool { return s.inflight == nil && (s.dirty > 0 || s.book > 0) }

// start records that a snapshot named id of the state after execution seq was asked for.
func (s *scheduler) start(id string, seq int64) *inflight {
	s.inflight = &inflight{id: id, seq: seq, started: time.Now(), covers: s.dirty, coversBook: s.book}
	return s.inflight
}

// finish records the end of the snapshot in flight and returns it (nil when none was).
func (s *scheduler) finish(r snapResult) *inflight {
	in := s.inflight
	s.inflight = nil
	covers, coversBook := r.seq, r.seq
	if in != nil {
		covers, coversBook = in.covers, in.coversBook
	}
	if r.err != nil {
		if s.dirty > 0 && s.dirty <= covers {
			s.failed = s.dirty
		}
		return in
	}
	s.savedSeq, s.savedID = r.seq, r.id
	if s.dirty <= covers {
		// Nothing ran between the request and now: the saved state is the live one. (An
		// execution that ran after the request left a newer dirty mark.)
		s.dirty, s.failed = 0, 0
	}
	if s.book <= coversBook {
		s.book = 0
	}
	return in
}

// restarted records a kernel started from the snapshot id after execution seq ("" and 0: an
// empty state): the live state is that snapshot's.
func (s *scheduler) restarted(id string, seq int64) {
	s.savedSeq, s.savedID = seq, id
	s.dirty, s.failed, s.book = 0, 0, 0
	s.inflight = nil
}
