package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

// The loop against a scripted fake of an OpenAI-compatible endpoint: the DataFrame built in
// step 1 is used in step 3, after the session's container was stopped and started again in
// between, and the model sees the session's context in every feedback message.
func TestAgentLoopKeepsStateAcrossARestart(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })

	script := []string{
		"Step 1.\n```python\nimport pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})\n```",
		"Step 2.\n```python\ndf['y'] = df.x * 2\n```",
		"Step 3.\n```python\nprint(int(df.y.sum()))\n```",
		"The sum is 12. TASK COMPLETE",
	}
	var (
		mu       sync.Mutex
		requests [][]message
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/v1/chat/completions", r.URL.Path)
		assert.Equal(t, "Bearer test-key", r.Header.Get("Authorization"))
		var req struct {
			Model    string    `json:"model"`
			Messages []message `json:"messages"`
		}
		if !assert.NoError(t, json.NewDecoder(r.Body).Decode(&req)) {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		requests = append(requests, req.Messages)
		i := len(requests) - 1
		mu.Unlock()
		reply := "TASK COMPLETE"
		if i < len(script) {
			reply = script[i]
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": message{"assistant", reply}}}})
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	steps, err := Run(ctx, c, Config{
		BaseURL: srv.URL + "/v1", APIKey: "test-key", Model: "fake", Task: "sum twice x", Session: name,
		BeforeStep: func(step int) {
			if step == 3 {
				require.NoError(t, c.Stop(ctx, name)) // the container goes away between steps
			}
		},
	})
	require.NoError(t, err)
	require.Len(t, steps, 4)
	for _, s := range steps[:3] {
		require.NotNil(t, s.Result)
		assert.Equal(t, "ok", string(s.Result.Status), s.Result.Stderr)
	}
	assert.Equal(t, "12\n", steps[2].Result.Stdout, "step 3 used the DataFrame from step 1 after the restart")
	assert.Contains(t, steps[3].Reply, "TASK COMPLETE")

	require.Len(t, requests, 4)
	last := requests[3][len(requests[3])-1].Content
	assert.Contains(t, last, "12")
	assert.Contains(t, last, "df: DataFrame", "the feedback carries the session's context")
	assert.True(t, strings.HasPrefix(requests[0][0].Content, "You solve data tasks"))
}
