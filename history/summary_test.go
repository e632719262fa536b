package history

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummarizeKeepsTheLatestExecutionOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	in := strings.Join([]string{
		`{"schema":1,"kind":"start","seq":1,"started":"2026-12-03T09:00:00Z","status":"running"}`,
		`{"schema":1,"kind":"end","seq":1,"status":"ok","stdout":"` + strings.Repeat("x", 1000) + `","duration_ms":5}`,
		`not json`,
		``,
		`{"schema":1,"kind":"start","seq":2,"started":"2026-12-03T10:00:00Z","status":"running"}`,
		`{"schema":1,"kind":"end","seq":2,"status":"ok","duration_ms":1500}`,
		`{"schema":1,"kind":"state","seq":2,"state":{"status":"saved"}}`,
	}, "\n")
	s, err := Summarize(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, int64(2), s.LastSeq)
	assert.Equal(t, t0.Add(1500*time.Millisecond), s.LastEnd)
	s, err = Summarize(strings.NewReader(""))
	require.NoError(t, err)
	assert.Zero(t, s.LastSeq)
}
