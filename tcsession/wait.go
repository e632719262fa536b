package tcsession

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/runtimectl/runtimectl/session"
)

// helloStrategy is ready when the session's agent answers its hello on a private stream (the
// relay waits for the agent's socket): the handle it opens is the one Container.Session
// returns.
type helloStrategy struct {
	client  *session.Client
	name    string
	timeout time.Duration
	sess    *session.Session
}

var _ wait.StrategyTimeout = (*helloStrategy)(nil)

func (w *helloStrategy) Timeout() *time.Duration { return &w.timeout }

func (w *helloStrategy) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	s, err := w.client.Attach(ctx, w.name)
	if err != nil {
		return fmt.Errorf("the agent of session %q did not answer: %w%s", w.name, err, logTail(ctx, target))
	}
	w.sess = s
	return nil
}

// logTail returns the end of the container's log, to say why an agent did not answer.
func logTail(ctx context.Context, target wait.StrategyTarget) string {
	rc, err := target.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	if s == "" {
		return ""
	}
	return "; the container's log ends with: " + s
}
