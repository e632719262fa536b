package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
)

// loadScale is RUNTIMECTL_LOAD=TOKENSxSESSIONSxEXECS (`make soak`: 20x10x2000); unset, the test
// is skipped: it is the load test, not part of the normal run.
func loadScale(t *testing.T) (tokens, sessions, execs int) {
	v := os.Getenv("RUNTIMECTL_LOAD")
	if v == "" {
		t.Skip("the load test: RUNTIMECTL_LOAD=20x10x2000 (make soak)")
	}
	parts := strings.Split(v, "x")
	require.Len(t, parts, 3, "RUNTIMECTL_LOAD=TOKENSxSESSIONSxEXECS")
	n := make([]int, 3)
	for i, p := range parts {
		var err error
		n[i], err = strconv.Atoi(p)
		require.NoError(t, err, "RUNTIMECTL_LOAD")
	}
	return n[0], n[1], n[2]
}

// TestServeLoad is many tenants at once on one in-process server: TOKENS tokens with SESSIONS
// bash sessions each, EXECS executions in all from all of them at once, mixed: small ones,
// large outputs (streamed past the non-streamed cap, or not), files up and down. The server's
// peak resident memory is read from /proc during the run and bounded by a budget; afterwards
// every session's history is read back and checked for gaps, for each execution's mark and for
// nothing of another session's.
func TestServeLoad(t *testing.T) {
	nTok, nSess, nExec := loadScale(t)
	const budget = 768 << 20
	c := testenv.Client(t)
	var lines strings.Builder
	lines.WriteString(fmt.Sprintf("role default sessions=%d execs=3\n", nSess))
	secrets := make([]string, nTok)
	for i := range secrets {
		secrets[i] = fmt.Sprintf("load-token-%02d-0123456789abcdef", i)
		fmt.Fprintf(&lines, "%s tenant%02d\n", secrets[i], i)
	}
	tf := filepath.Join(t.TempDir(), "tokens.txt")
	require.NoError(t, os.WriteFile(tf, []byte(lines.String()), 0o600))
	toks, err := server.LoadTokens(tf)
	require.NoError(t, err)
	base := newServer(t, c, func(cfg *server.Config) {
		cfg.Tokens = toks
		cfg.MaxOutput = 8 << 20
		cfg.WriteTimeout = time.Minute
	})
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = 64

	// Peak resident memory, sampled while the load runs (and VmHWM from the reset on).
	base0 := resetPeak(t)
	var sampled atomic.Int64
	stopSampling := make(chan struct{})
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		for {
			now, _ := rss(t)
			sampled.Store(max(sampled.Load(), now))
			select {
			case <-stopSampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// The sessions, made through the API, 8 at once.
	type sess struct {
		tok   int
		name  string
		marks []string // what each execution printed, in order
		mu    sync.Mutex
	}
	all := make([]*sess, 0, nTok*nSess)
	for i := 0; i < nTok; i++ {
		for j := 0; j < nSess; j++ {
			name := fmt.Sprintf("load-%s-%02d-%02d", testenv.Name(t)[len(testenv.Name(t))-6:], i, j)
			all = append(all, &sess{tok: i, name: name})
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, s := range all {
			wg.Add(1)
			sem <- struct{}{}
			go func(name string) {
				defer func() { <-sem; wg.Done() }()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				_ = c.Remove(ctx, name, true)
			}(s.name)
		}
		wg.Wait()
	})
	startAt := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var startErrs atomic.Int64
	for _, s := range all {
		wg.Add(1)
		sem <- struct{}{}
		go func(s *sess) {
			defer func() { <-sem; wg.Done() }()
			a := api{t: t, base: base, token: secrets[s.tok]}
			resp := a.req("POST", "/v1/sessions", map[string]any{"name": s.name, "lang": "bash"}, nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				startErrs.Add(1)
				t.Errorf("start %s: %d %s", s.name, resp.StatusCode, b)
			}
		}(s)
	}
	wg.Wait()
	require.Zero(t, startErrs.Load())
	t.Logf("%d sessions of %d tokens started in %s", len(all), nTok, time.Since(startAt).Round(time.Second))

	// The executions: each token runs its share over its sessions, 3 at once (its execs limit).
	runAt := time.Now()
	var done, large, streamedLarge, files atomic.Int64
	perTok := nExec / nTok
	var twg sync.WaitGroup
	for i := 0; i < nTok; i++ {
		mine := all[i*nSess : (i+1)*nSess]
		a := api{t: t, base: base, token: secrets[i]}
		jobs := make(chan int)
		for w := 0; w < 3; w++ {
			twg.Add(1)
			go func(w int) {
				defer twg.Done()
				for k := range jobs {
					s := mine[(k*3+w)%len(mine)]
					s.mu.Lock() // one execution at a time per session: the marks stay in order
					mark := fmt.Sprintf("mark-%s-%d", s.name, len(s.marks)+1)
					err := loadOne(a, s.name, mark, k, &large, &streamedLarge, &files)
					if err == nil {
						s.marks = append(s.marks, mark)
					}
					s.mu.Unlock()
					if err != nil {
						t.Errorf("%s: %v", s.name, err)
						continue
					}
					done.Add(1)
				}
			}(w)
		}
		twg.Add(1)
		go func() {
			defer twg.Done()
			for k := 0; k < perTok; k++ {
				jobs <- k
			}
			close(jobs)
		}()
	}
	twg.Wait()
	close(stopSampling)
	<-sampling
	_, hwm := rss(t)
	peak := max(hwm, sampled.Load())
	took := time.Since(runAt)
	t.Logf("%d executions (%d with large output, %d of them streamed; %d file round trips) in %s, %.0f/s; server resident %d MiB before, peak %d MiB (budget %d MiB)",
		done.Load(), large.Load(), streamedLarge.Load(), files.Load(), took.Round(time.Second), float64(done.Load())/took.Seconds(), base0>>20, peak>>20, budget>>20)
	assert.Equal(t, int64(perTok*nTok), done.Load())
	assert.Less(t, peak, int64(budget), "the server's peak memory stays within the budget")

	// Every history: seqs 1..n without a gap, each execution's mark in its own record.
	var gaps atomic.Int64
	hsem := make(chan struct{}, 8)
	var hwg sync.WaitGroup
	for _, s := range all {
		hwg.Add(1)
		hsem <- struct{}{}
		go func(s *sess) {
			defer func() { <-hsem; hwg.Done() }()
			a := api{t: t, base: base, token: secrets[s.tok]}
			resp := a.req("GET", "/v1/sessions/"+s.name+"/history", nil, nil)
			defer resp.Body.Close()
			var hist []struct {
				Seq    int64  `json:"seq"`
				Status string `json:"status"`
				Code   string `json:"code"`
				Stdout string `json:"stdout"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&hist); err != nil {
				t.Errorf("history of %s: %v", s.name, err)
				return
			}
			if len(hist) != len(s.marks) {
				gaps.Add(1)
				t.Errorf("history of %s: %d records for %d executions", s.name, len(hist), len(s.marks))
				return
			}
			for i, h := range hist {
				if h.Seq != int64(i+1) || h.Status != "ok" || !strings.Contains(h.Code, s.marks[i]) || !strings.Contains(h.Stdout, s.marks[i]) {
					gaps.Add(1)
					t.Errorf("history of %s, record %d: seq %d, status %s, want the mark %s", s.name, i, h.Seq, h.Status, s.marks[i])
					return
				}
				if strings.Contains(h.Stdout, "mark-load") && strings.Count(h.Stdout, "mark-") > 1 {
					t.Errorf("history of %s, record %d holds another mark", s.name, i)
				}
			}
		}(s)
	}
	hwg.Wait()
	assert.Zero(t, gaps.Load(), "every history is whole")
}

// loadOne runs one execution of the mix: mostly small, every 7th a large output (every other
// one of those streamed, past the non-streamed cap), every 10th a file up and down.
func loadOne(a api, name, mark string, k int, large, streamedLarge, files *atomic.Int64) error {
	switch {
	case k%10 == 9:
		files.Add(1)
		body := make([]byte, 256<<10+k)
		_, _ = rand.Read(body)
		p := fmt.Sprintf("/v1/sessions/%s/files/f%d.bin", name, k)
		if st, raw := a.tryDo("PUT", p, body); st != http.StatusNoContent {
			return fmt.Errorf("put: %d %s", st, raw)
		}
		st, got := a.tryDo("GET", p, nil)
		if st != http.StatusOK || !bytes.Equal(got, body) {
			return fmt.Errorf("get: %d, %d bytes of %d", st, len(got), len(body))
		}
		return a.run(name, fmt.Sprintf("echo %s; wc -c < f%d.bin; rm f%d.bin", mark, k, k), false, 0)
	case k%7 == 3:
		large.Add(1)
		n := (1 + k%4) << 20
		stream := k%2 == 1
		if stream {
			streamedLarge.Add(1)
			n = 6 << 20
		}
		return a.run(name, fmt.Sprintf("echo %s; head -c %d /dev/zero | tr '\\0' x; echo", mark, n), stream, n)
	default:
		return a.run(name, fmt.Sprintf("x=$((${x:-0} + 1)); echo %s $x", mark), k%3 == 0, 0)
	}
}

// tryDo is do without failing the test from a worker goroutine.
func (a api) tryDo(method, path string, body []byte) (int, []byte) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, r)
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// run executes code, streamed or not, and checks that it ended ok with at least want bytes of
// output (what the cap allows, for one not streamed).
func (a api) run(name, code string, stream bool, want int) error {
	body := map[string]any{"code": code, "timeout": 120}
	if stream {
		body["max_output"] = "8m" // streamed: nothing of it is kept, the ceiling allows it
	}
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", a.base+"/v1/sessions/"+name+"/exec", bytes.NewReader(j))
	req.Header.Set("Authorization", "Bearer "+a.token)
	if stream {
		req.Header.Set("Accept", server.NDJSON)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("exec: %d %s", resp.StatusCode, b)
	}
	var status string
	got := 0
	if stream {
		br := bufio.NewReaderSize(resp.Body, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				var ev struct{ Event, Data, Status string }
				if json.Unmarshal(line, &ev) != nil {
					return fmt.Errorf("bad event %.100q", line)
				}
				switch ev.Event {
				case "stdout":
					got += len(ev.Data)
				case "end":
					status = ev.Status
				case "fail":
					return fmt.Errorf("fail event: %s", line)
				}
			}
			if err != nil {
				break
			}
		}
	} else {
		var res struct{ Status, Stdout string }
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return err
		}
		status, got = res.Status, len(res.Stdout)
		want = min(want, 4<<20)
	}
	if status != "ok" {
		return fmt.Errorf("status %q", status)
	}
	if got < want {
		return fmt.Errorf("%d bytes of output, want at least %d", got, want)
	}
	return nil
}
