package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/volumes"
)

// PackagesDir is the session's virtual environment for installed packages, on its workspace
// volume: it survives stop and start, kills, --upgrade and fork, and the Python kernel imports
// from it at once (it looks at the folder again whenever it changed).
const PackagesDir = Workspace + "/.venv"

// InstallOptions say what Install installs, as pip names its options.
type InstallOptions struct {
	Packages []string // requirement specifiers: "requests", "pandas>=2", "./dist/x.whl" is not: the installer has no host files
	// Requirements is the content of a requirements file (pip's -r), read on the host.
	Requirements   string
	IndexURL       string
	ExtraIndexURLs []string
	TrustedHosts   []string
	NoDeps         bool
	// Output receives pip's output as it runs (nil: discarded).
	Output io.Writer
}

var pipOption = regexp.MustCompile(`^-`)

// Install installs Python packages into the session's virtual environment (PackagesDir) with
// pip, in a short-lived installer container of the session's image that has network access
// and the session's workspace volume mounted, and then exits: the session itself keeps its
// network setting (none by default). The session's interpreter can import them at once, without
// a restart. It works on a running or a stopped session.
func (c *Client) Install(ctx context.Context, name string, o InstallOptions) error {
	if c.docker == nil {
		return fmt.Errorf("%w: packages are installed by an installer container, which runtimectl runs on Docker only for now", ErrInvalid)
	}
	if len(o.Packages) == 0 && o.Requirements == "" {
		return fmt.Errorf("%w install: name at least one package (or a requirements file)", ErrInvalid)
	}
	for _, p := range o.Packages {
		if p == "" || pipOption.MatchString(p) {
			return fmt.Errorf("%w package %q: give package names or specifiers; pip's options have their own flags", ErrInvalid, p)
		}
	}
	st, err := c.RecordedSettings(ctx, name)
	if err != nil {
		return err
	}
	if st.Lang != "python" {
		return fmt.Errorf("%w: session %q is a %s session: packages are installed into Python sessions", ErrInvalid, name, st.Lang)
	}
	args := []string{"install", "--no-input", "--disable-pip-version-check", "--no-warn-script-location"}
	if o.IndexURL != "" {
		args = append(args, "--index-url", o.IndexURL)
	}
	for _, u := range o.ExtraIndexURLs {
		args = append(args, "--extra-index-url", u)
	}
	for _, h := range o.TrustedHosts {
		args = append(args, "--trusted-host", h)
	}
	if o.NoDeps {
		args = append(args, "--no-deps")
	}
	if o.Requirements != "" {
		args = append(args, "-r", "/tmp/requirements.txt")
	}
	args = append(args, o.Packages...)
	// The venv sees the image's own packages (numpy, pandas...), and pip installs beside them.
	script := `set -e
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv --system-site-packages "$VENV"; fi
if [ -n "$RUNTIMECTL_REQUIREMENTS" ]; then printf '%s\n' "$RUNTIMECTL_REQUIREMENTS" > /tmp/requirements.txt; fi
exec "$VENV/bin/python" -m pip "$@"`
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	tail := &Tail{Max: 2048}
	w := io.MultiWriter(out, tail)
	code, err := c.docker.RunInstaller(ctx, containers.Installer{
		Image: st.Image, Volume: volumes.Name(name),
		Argv: append([]string{"/bin/sh", "-c", script, "sh"}, args...),
		Env: []string{"VENV=" + PackagesDir, "HOME=/tmp", "PIP_CACHE_DIR=/tmp/pip-cache", "PYTHONDONTWRITEBYTECODE=",
			"RUNTIMECTL_REQUIREMENTS=" + o.Requirements},
		Labels: map[string]string{containers.LabelSession: name},
	}, w)
	if err != nil {
		if errors.Is(err, containers.ErrNotFound) {
			return fmt.Errorf("install into session %q: its image %s is gone: %w", name, st.Image, err)
		}
		return fmt.Errorf("install into session %q: %w", name, err)
	}
	if code != 0 {
		return fmt.Errorf("install into session %q: pip exited with code %d: %s", name, code, lastLine(tail.String()))
	}
	return nil
}

// Install installs packages into the session (see Client.Install).
func (s *Session) Install(ctx context.Context, o InstallOptions) error {
	return s.c.Install(ctx, s.name, o)
}

// Tail is an io.Writer that keeps the last Max bytes written to it (pip's output, say).
type Tail struct {
	Max int
	b   []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = t.b[len(t.b)-t.Max:]
	}
	return len(p), nil
}

// String returns what it kept.
func (t *Tail) String() string { return string(t.b) }

// lastLine returns the last line of pip's output that says something (its error).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return "no output"
}

// writerFunc is a handler as an io.Writer (which, as io.Writer says, keeps no reference to p).
type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}

var pipLine = regexp.MustCompile(`^([ \t]*)(?:%pip|!pip3?|!python3? -m pip)[ \t]+install[ \t]+(.*)$`)

// pipLines finds IPython's `%pip install ...` (and `!pip install ...`) lines in Python code:
// each becomes an InstallOptions, and the line a comment that says it was done. Options pip
// takes that runtimectl does not pass on are an error naming them.
func pipLines(code string) (string, []InstallOptions, error) {
	if !strings.Contains(code, "pip") {
		return code, nil, nil
	}
	lines := strings.Split(code, "\n")
	var installs []InstallOptions
	for i, line := range lines {
		m := pipLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var o InstallOptions
		words := strings.Fields(m[2])
		for k := 0; k < len(words); k++ {
			w := strings.Trim(words[k], `"'`)
			val := func() (string, error) {
				if name, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(name, "--") {
					return v, nil
				}
				if k+1 >= len(words) {
					return "", fmt.Errorf("%w %s: %s needs a value", ErrInvalid, strings.TrimSpace(line), w)
				}
				k++
				return strings.Trim(words[k], `"'`), nil
			}
			flag, _, _ := strings.Cut(w, "=")
			var err error
			switch flag {
			case "-q", "--quiet", "-U", "--upgrade", "--user", "--no-cache-dir", "--pre":
				// quiet and upgrade-alike: the installer's defaults do
			case "--no-deps":
				o.NoDeps = true
			case "-i", "--index-url":
				o.IndexURL, err = val()
			case "--extra-index-url":
				var v string
				v, err = val()
				o.ExtraIndexURLs = append(o.ExtraIndexURLs, v)
			case "--trusted-host":
				var v string
				v, err = val()
				o.TrustedHosts = append(o.TrustedHosts, v)
			default:
				if strings.HasPrefix(w, "-") {
					return "", nil, advice.Errorf("%w %s: runtimectl's installer does not take %s (it takes --index-url, --extra-index-url, --trusted-host, --no-deps; for a requirements file %s)", ErrInvalid, strings.TrimSpace(line), w, advice.Words{Lib: "use Session.Install with Requirements", CLI: "use `runtimectl session install NAME -r FILE`"})
				}
				o.Packages = append(o.Packages, w)
			}
			if err != nil {
				return "", nil, err
			}
		}
		if len(o.Packages) == 0 {
			return "", nil, fmt.Errorf("%w %s: name at least one package", ErrInvalid, strings.TrimSpace(line))
		}
		installs = append(installs, o)
		lines[i] = m[1] + "pass  # " + strings.TrimSpace(line) + ": installed by runtimectl before this cell ran"
	}
	return strings.Join(lines, "\n"), installs, nil
}
