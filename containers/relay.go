package containers

import (
	"github.com/runtimectl/runtimectl/contract"

	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

// AgentCommand is the relay that joins a client to the agent inside the container.
var AgentCommand = contract.ConnectCommand()

// Dial opens a private duplex stream to the session's agent: a docker exec of the relay, with
// its stdin and stdout as the stream. Closing the stream ends the relay; the agent goes on.
func (m *Manager) Dial(ctx context.Context, session string) (io.ReadWriteCloser, error) {
	ex, err := m.api.ContainerExecCreate(ctx, Name(session), container.ExecOptions{
		Cmd: AgentCommand, User: "0:0",
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("open a stream to session %q: %w", session, m.classify(err))
	}
	hj, err := m.api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("attach to session %q: %w", session, m.classify(err))
	}
	return &stream{hj: hj}, nil
}

// stream demultiplexes the exec's output (Docker's 8-byte stream headers, no TTY) in place:
// stdout payloads are returned by Read, stderr payloads (the relay's own errors) are kept for
// diagnostics.
type stream struct {
	hj      types.HijackedResponse
	remain  int // bytes left in the current stdout payload
	hdr     [8]byte
	errMu   sync.Mutex
	errBuf  bytes.Buffer
	closeMu sync.Once
}

func (s *stream) Read(p []byte) (int, error) {
	for s.remain == 0 {
		if _, err := io.ReadFull(s.hj.Reader, s.hdr[:]); err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return 0, s.wrapEOF(err)
		}
		n := int(binary.BigEndian.Uint32(s.hdr[4:8]))
		switch s.hdr[0] {
		case 1:
			s.remain = n
		default: // stderr (2) or anything else: keep a bounded copy
			buf := make([]byte, n)
			if _, err := io.ReadFull(s.hj.Reader, buf); err != nil {
				return 0, s.wrapEOF(err)
			}
			s.errMu.Lock()
			if s.errBuf.Len() < 4096 {
				s.errBuf.Write(buf)
			}
			s.errMu.Unlock()
		}
	}
	if len(p) > s.remain {
		p = p[:s.remain]
	}
	n, err := s.hj.Reader.Read(p)
	s.remain -= n
	if err != nil && err != io.EOF {
		return n, err
	}
	if err == io.EOF && s.remain > 0 {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

func (s *stream) wrapEOF(err error) error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.errBuf.Len() > 0 && err == io.EOF {
		return fmt.Errorf("%w (relay said: %s)", io.EOF, bytes.TrimSpace(s.errBuf.Bytes()))
	}
	return err
}

func (s *stream) Write(p []byte) (int, error) { return s.hj.Conn.Write(p) }

func (s *stream) Close() error {
	s.closeMu.Do(func() {
		_ = s.hj.CloseWrite()
		s.hj.Close()
	})
	return nil
}
