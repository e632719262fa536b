package agent

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/runtimectl/runtimectl/execproto"
)

// Displays (docs/kernel-protocol.md, "display"): the driver writes the execution's sync token
// on fd 1 and fd 2 and then the display event n on fd 4. The captures cut the tokens out; the
// gate sends display n once both streams have delivered what came before their n-th token,
// and holds each stream's reader at its token until then, so a display is in its place among
// the output whatever the order in which the three pipes are read.

// displayGate orders one execution's displays with its two output streams.
type displayGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	reached [2]int                    // tokens seen on stdout, stderr
	pending map[int]execproto.Display // display events by n, not sent yet
	sent    int                       // displays sent (the n of the last)
	closed  bool
	emit    func(d execproto.Display) // sends one display; called with mu held, in order
}

func newDisplayGate(emit func(d execproto.Display)) *displayGate {
	g := &displayGate{pending: map[int]execproto.Display{}, emit: emit}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// arrive is a stream's reader at its next token: it returns once the display of that token
// has been sent (or the gate closed).
func (g *displayGate) arrive(stream int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reached[stream]++
	n := g.reached[stream]
	g.flush()
	for !g.closed && g.sent < n {
		g.cond.Wait()
	}
}

// display takes the display event n (from the run loop).
func (g *displayGate) display(n int, d execproto.Display) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	if n <= g.sent {
		n = g.sent + 1 // a driver that numbers badly: in the order received
	}
	g.pending[n] = d
	g.flush()
}

func (g *displayGate) flush() {
	for {
		next := g.sent + 1
		d, ok := g.pending[next]
		if !ok || g.reached[0] < next || g.reached[1] < next {
			break
		}
		delete(g.pending, next)
		g.emit(d)
		g.sent = next
	}
	g.cond.Broadcast()
}

// close sends what is still pending, in order, and lets the readers go: the execution ended
// (a driver that wrote no tokens, or died between a token and its display).
func (g *displayGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	for len(g.pending) > 0 {
		next := g.sent + 1
		if d, ok := g.pending[next]; ok {
			delete(g.pending, next)
			g.emit(d)
		}
		g.sent = next
	}
	g.cond.Broadcast()
}

// displays is what an execution keeps of its displays: the positions, the caps, the record.
type displays struct {
	toClient bool // the client asked for Display frames
	send     func(d execproto.Display)
	out, err *atomic.Int64 // bytes of each stream delivered so far
	total    int64         // display bytes delivered
	kept     []execproto.Display
}

// emit places d at the streams' positions, caps it and sends it (with the gate's lock held).
func (ds *displays) emit(d execproto.Display) {
	d.StdoutPos, d.StderrPos = ds.out.Load(), ds.err.Load()
	n := displaySize(d)
	if n > execproto.DisplayMax || ds.total+n > execproto.DisplayTotalMax {
		d = droppedDisplay(d, n, fmt.Sprintf("the limit is %d MiB a display and %d MiB an execution", execproto.DisplayMax>>20, execproto.DisplayTotalMax>>20))
		n = displaySize(d)
	}
	ds.total += n
	ds.kept = append(ds.kept, d)
	if ds.toClient {
		ds.send(d)
	}
}

func displaySize(d execproto.Display) int64 {
	n := int64(len(d.Metadata))
	for k, v := range d.Data {
		n += int64(len(k) + len(v))
	}
	return n
}

// droppedDisplay is d with its data replaced by a text/plain line that says why.
func droppedDisplay(d execproto.Display, size int64, why string) execproto.Display {
	text, _ := json.Marshal(fmt.Sprintf("[runtimectl: display of %d bytes dropped: %s]", size, why))
	d.Data = map[string]json.RawMessage{"text/plain": text}
	d.Metadata = json.RawMessage(fmt.Sprintf(`{"runtimectl":{"dropped":%d}}`, size))
	return d
}

// displayOf is the Display of a driver's display event.
func displayOf(ev kernelEvent) execproto.Display {
	return execproto.Display{Kind: ev.Kind, Data: ev.Data, Metadata: ev.Metadata, DisplayID: ev.DisplayID, Wait: ev.Wait}
}
