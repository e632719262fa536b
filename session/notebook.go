package session

import (
	"context"

	"github.com/runtimectl/runtimectl/execproto"
)

// What a notebook front end (a Jupyter kernel) asks of the interpreter besides executions.
// Python sessions answer them with IPython, as ipykernel does; other languages get the
// neutral answers (no matches, not found, status "unknown"), never an error. They wait for
// the execution running, as a Jupyter kernel's shell channel does.

// CompleteReply is Jupyter's complete_reply without its status: Matches replace
// code[CursorStart:CursorEnd].
type CompleteReply = execproto.CompleteReply

// InspectReply is Jupyter's inspect_reply without its status: Data is a mime bundle.
type InspectReply = execproto.InspectReply

// IsCompleteReply is Jupyter's is_complete_reply: Status complete, incomplete (Indent for the
// next line), invalid or unknown.
type IsCompleteReply = execproto.IsCompleteReply

// Complete returns the completions of code at cursorPos (in Unicode code points, as Jupyter
// counts them).
func (s *Session) Complete(ctx context.Context, code string, cursorPos int) (CompleteReply, error) {
	var rep CompleteReply
	err := s.query(ctx, execproto.Request{Op: execproto.OpComplete, Code: code, CursorPos: cursorPos}, &rep)
	if rep.Matches == nil {
		rep.Matches = []string{}
	}
	return rep, err
}

// Inspect returns what the interpreter knows of the name at cursorPos (detailLevel 0: the
// signature and docstring, as obj?; 1: the source too, as obj??).
func (s *Session) Inspect(ctx context.Context, code string, cursorPos, detailLevel int) (InspectReply, error) {
	var rep InspectReply
	err := s.query(ctx, execproto.Request{Op: execproto.OpInspect, Code: code, CursorPos: cursorPos, DetailLevel: detailLevel}, &rep)
	return rep, err
}

// IsComplete says whether code is a complete cell or needs more lines (a console's Enter).
func (s *Session) IsComplete(ctx context.Context, code string) (IsCompleteReply, error) {
	var rep IsCompleteReply
	err := s.query(ctx, execproto.Request{Op: execproto.OpIsComplete, Code: code}, &rep)
	return rep, err
}

func (s *Session) query(ctx context.Context, req execproto.Request, reply any) error {
	conn, _, err := s.client(ctx)
	if err != nil {
		return err
	}
	return conn.Call(ctx, req, reply)
}
