package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/runtimectl/runtimectl/execproto"
)

// Serve accepts connections on the agent's unix socket until ctx ends. The socket lives in a
// directory only root can enter, so user code cannot reach it: clients come in through
// `runtime-agent connect`, run by `docker exec`, which hands its stream over (see Connect).
func (a *Agent) Serve(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(a.cfg.Socket), 0o700); err != nil {
		return err
	}
	_ = os.Remove(a.cfg.Socket)
	ln, err := net.Listen("unix", a.cfg.Socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Socket, err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			rw, err := accept(c)
			if err != nil {
				c.Close()
				return
			}
			a.serveConn(rw)
		}()
	}
}

// ServeConn speaks the protocol on one connection until it ends. Jobs it queued run on.
func (a *Agent) serveConn(c io.ReadWriteCloser) {
	defer c.Close()
	sc, err := execproto.NewServerConn(c, a.Hello())
	if err != nil {
		return
	}
	// The connection's jobs that have not finished, for its interrupt frames. Each job takes
	// itself out when it ends, so a connection that runs any number of requests keeps only
	// those still queued or running.
	var mu sync.Mutex
	mine := map[uint32]*job{}
	for {
		f, err := sc.Next()
		if err != nil {
			return
		}
		switch f.Type {
		case execproto.TypeInterrupt:
			mu.Lock()
			j := mine[f.ID]
			mu.Unlock()
			if j != nil {
				j.stop()
			}
		case execproto.TypeRequest:
			var req execproto.Request
			if err := json.Unmarshal(f.Payload, &req); err != nil {
				_ = sc.SendError(f.ID, "bad_request", "malformed request: "+err.Error())
				continue
			}
			switch req.Op {
			case execproto.OpStatus:
				_ = sc.SendJSON(execproto.TypeReply, f.ID, a.Status())
			case execproto.OpFiles:
				_ = sc.SendJSON(execproto.TypeReply, f.ID, listFiles(a.cfg.Workdir, a.cfg.StateDir, 200))
			case execproto.OpClaim:
				if req.Name == "" || !a.claimedAs.CompareAndSwap(nil, &req.Name) {
					_ = sc.SendError(f.ID, "claimed", "this pool member is another start's, or has no name to take")
				} else {
					a.recordClaim(req.Name)
					_ = sc.SendJSON(execproto.TypeReply, f.ID, execproto.ClaimReply{Claimed: true})
				}
			case execproto.OpInterrupt:
				ok := a.Interrupt()
				_ = sc.SendJSON(execproto.TypeReply, f.ID, map[string]bool{"interrupted": ok})
			case execproto.OpExec, execproto.OpSnapshot, execproto.OpDrain, execproto.OpRestore, execproto.OpVars,
				execproto.OpComplete, execproto.OpInspect, execproto.OpIsComplete:
				j := &job{req: req, conn: sc, id: f.ID, interrupt: make(chan struct{})}
				j.finished = func() {
					mu.Lock()
					if mine[j.id] == j {
						delete(mine, j.id)
					}
					mu.Unlock()
				}
				mu.Lock()
				mine[f.ID] = j
				mu.Unlock()
				if err := a.Enqueue(j); err != nil {
					j.finished()
					_ = sc.SendError(f.ID, "busy", err.Error())
					continue
				}
			default:
				_ = sc.SendError(f.ID, "bad_request", fmt.Sprintf("unknown operation %q", req.Op))
			}
		}
	}
}

// copyPlain copies with plain reads and writes. io.Copy would splice from the socket into
// stdout, a pipe the Go runtime cannot poll, and spin on EAGAIN (measured: two thirds of the
// splices) under a fast stream.
func copyPlain(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		r, err := src.Read(buf)
		if r > 0 {
			w, werr := dst.Write(buf[:r])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
	}
}
