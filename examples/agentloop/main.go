// Command agentloop is the loop that agent builders write around runtimectl: ask a model for
// code, run it in a session, feed back the result and the session's context, and stop when the
// model says "TASK COMPLETE". Any OpenAI-compatible chat endpoint works:
//
//	OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=... MODEL=... \
//	  go run ./examples/agentloop "Load data/sales.csv and report the best region"
//
// The session keeps the objects between steps, so the model never re-runs earlier steps and
// the agent never keeps its own copy of the state: `session context` is its memory.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

const systemPrompt = `You solve data tasks by writing Python that runs in a persistent session:
variables, imports and functions from earlier steps are still there. Reply with exactly one
` + "```python" + ` code block per step. When the task is solved, reply with the answer and the words
TASK COMPLETE.`

// Config is what one run needs.
type Config struct {
	BaseURL  string // e.g. https://api.openai.com/v1
	APIKey   string
	Model    string
	Task     string
	Session  string // created if missing
	MaxSteps int
	// BeforeStep, when set, is called before each model request (tests use it to restart the
	// session's container in the middle of a task).
	BeforeStep func(step int)
	Log        io.Writer
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Step is one turn of the loop.
type Step struct {
	Reply  string
	Code   string
	Result *session.Result
}

var codeBlock = regexp.MustCompile("(?s)```(?:python|py)?\\s*\\n(.*?)```")

// Run drives the loop until the model says TASK COMPLETE or MaxSteps is reached.
func Run(ctx context.Context, c *session.Client, cfg Config) ([]Step, error) {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 10
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s, _, err := c.Start(ctx, session.Spec{Name: cfg.Session, Lang: "python"})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	msgs := []message{{"system", systemPrompt}, {"user", cfg.Task}}
	var steps []Step
	for i := 1; i <= cfg.MaxSteps; i++ {
		if cfg.BeforeStep != nil {
			cfg.BeforeStep(i)
		}
		reply, err := chat(ctx, cfg, msgs)
		if err != nil {
			return steps, err
		}
		msgs = append(msgs, message{"assistant", reply})
		step := Step{Reply: reply}
		if strings.Contains(reply, "TASK COMPLETE") {
			steps = append(steps, step)
			return steps, nil
		}
		m := codeBlock.FindStringSubmatch(reply)
		if m == nil {
			steps = append(steps, step)
			msgs = append(msgs, message{"user", "Reply with one ```python code block, or TASK COMPLETE."})
			continue
		}
		step.Code = m[1]
		res, err := s.Exec(ctx, step.Code, session.ExecOptions{Timeout: 2 * time.Minute,
			OnNotice: func(n string) { fmt.Fprintln(cfg.Log, "runtimectl:", n) }})
		if err != nil {
			return steps, err
		}
		step.Result = res
		steps = append(steps, step)
		fmt.Fprintf(cfg.Log, "step %d: %s\n", i, res.Status)
		sum, err := c.Context(ctx, cfg.Session, session.ContextOptions{})
		if err != nil {
			return steps, err
		}
		msgs = append(msgs, message{"user", feedback(res, sum.Text(3000))})
	}
	return steps, errors.New("the model did not finish within the step limit")
}

func feedback(res *session.Result, ctxText string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Execution %d: %s\n", res.Seq, res.Status)
	if res.Stdout != "" {
		fmt.Fprintf(&b, "stdout:\n%s\n", clip(res.Stdout, 2000))
	}
	if res.Result != nil {
		fmt.Fprintf(&b, "result: %s\n", clip(*res.Result, 2000))
	}
	if res.Error != nil {
		fmt.Fprintf(&b, "error: %s: %s\n%s\n", res.Error.Name, res.Error.Value, clip(res.Error.Traceback, 2000))
	}
	b.WriteString("\nSession state:\n")
	b.WriteString(ctxText)
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func chat(ctx context.Context, cfg Config, msgs []message) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": cfg.Model, "messages": msgs})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(cfg.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("chat: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return "", fmt.Errorf("chat: %s: %s", resp.Status, b)
	}
	var out struct {
		Choices []struct {
			Message message `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("chat: decode: %w", err)
	}
	if len(out.Choices) == 0 {
		return "", errors.New("chat: no choices in the reply")
	}
	return out.Choices[0].Message.Content, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agentloop TASK (with OPENAI_BASE_URL, OPENAI_API_KEY, MODEL set)")
		os.Exit(2)
	}
	cfg := Config{
		BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"), Model: os.Getenv("MODEL"),
		Task: strings.Join(os.Args[1:], " "), Session: "agentloop", Log: os.Stderr,
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.openai.com/v1"
	}
	de, err := docker.New("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	c := session.NewWithEngine(de)
	defer c.Close()
	steps, err := Run(context.Background(), c, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentloop:", err)
		os.Exit(1)
	}
	fmt.Println(steps[len(steps)-1].Reply)
}
