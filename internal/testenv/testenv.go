// Package testenv sets up what integration tests need and testcontainers-go does not: the
// session images built once from this repository's Dockerfiles (through the project's own
// builder), unique session names from the test's name, and contexts bounded by the test.
// Sessions themselves come from tcsession (testcontainers-go), which removes them. Tests that
// use it are skipped under `go test -short` only; without -short a missing engine is a
// failure, not a skip.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/tcsession"
)

// No registry to pull testcontainers' reaper (Ryuk) from here: unless the environment says
// otherwise (TESTCONTAINERS_RYUK_DISABLED=false where it can run), the tests clean up through
// Terminate. Set before any test runs: testcontainers reads its configuration once.
func init() {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

var (
	once     sync.Once
	setupErr error
)

// Images builds every language's image once per test binary (skipped when their content
// hash is unchanged).
func Images(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Docker (skipped under -short)")
	}
	once.Do(func() {
		de, err := docker.New("")
		if err != nil {
			setupErr = err
			return
		}
		c := session.NewWithEngine(de)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		var progress io.Writer = io.Discard
		if os.Getenv("RUNTIMECTL_TEST_VERBOSE") != "" {
			progress = os.Stderr
		}
		for _, n := range lang.Names() {
			l, _ := lang.Get(n)
			if _, _, err := docker.From(c).Images().Build(ctx, images.BuildOptions{Lang: l, Progress: progress}); err != nil {
				setupErr = fmt.Errorf("build %s image: %w", n, err)
				return
			}
		}
	})
	if setupErr != nil {
		t.Fatalf("integration setup: %v", setupErr)
	}
}

// Client returns a session client closed at the end of the test.
func Client(t testing.TB) *session.Client {
	t.Helper()
	Images(t)
	de, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	c := session.NewWithEngine(de)
	t.Cleanup(func() { c.Close() })
	return c
}

// Name returns a unique session name derived from the test's name.
func Name(t testing.TB) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	base := strings.ToLower(t.Name())
	base = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, base)
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return strings.Trim("t-"+base, "-") + "-" + hex.EncodeToString(b)
}

// Start starts a session through tcsession (testcontainers-go: the container, its readiness
// and its removal with the session's volumes at the end of the test) and returns its handle.
// A spec without a name gets a unique one; without an image, runtimectl's image for its
// language. c is the test's client, kept in the signature for the tests that drive the session
// through it; the session is the same whichever client opens it.
func Start(t testing.TB, c *session.Client, spec session.Spec) *session.Session {
	t.Helper()
	Images(t)
	if spec.Name == "" {
		spec.Name = Name(t)
	}
	if spec.TestRun == "" {
		spec.TestRun = session.TestRunID() // a test binary killed mid-run: the next gc removes it
	}
	image := spec.Image
	if image == "" {
		name := spec.Lang
		if name == "" {
			name = "python"
		}
		l, err := lang.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		image = images.Ref(l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctr, err := tcsession.Run(ctx, image, tcsession.WithSpec(spec))
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatalf("start session %s: %v", spec.Name, err)
	}
	s, err := ctr.Session(ctx)
	if err != nil {
		t.Fatalf("session %s: %v", spec.Name, err)
	}
	return s
}

// Ctx returns a context that ends with the test or after d.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// WriterFunc is a function as an io.Writer, for ExecOptions.Stdout in tests that look at each
// chunk as it arrives.
type WriterFunc func(p []byte)

func (f WriterFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
