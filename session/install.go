package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/egress"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
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
	// AllowBuilds lets pip build source distributions (sdists, folders, VCS URLs), which runs
	// their setup code in the installer. Off, pip takes wheels only (--only-binary :all:), and
	// a path or URL must name a wheel: nothing of the package runs at install. An install that
	// the session's own code asks for (`%pip` in a cell) never builds unless the Client allows
	// it (WithInstallBuilds), since that code may be an attacker's.
	AllowBuilds bool
	// Timeout bounds the install (0: engine.InstallTimeout); the installer kills itself
	// when it passes, whether or not the caller is still there.
	Timeout time.Duration
	// Output receives pip's output as it runs (nil: discarded).
	Output io.Writer

	// cell marks an install that a cell's code asked for (a `%pip` line): its index URLs may
	// name only the operator's index and the hosts the session itself may reach (cellIndex).
	cell bool
}

// WithInstallBuilds lets the installs that a session's code asks for (`%pip install` in a
// cell) build source distributions (see InstallOptions.AllowBuilds): an operator's choice.
func WithInstallBuilds() Option { return func(o *options) { o.installBuilds = true } }

// installIndex is a Client's index for the installs that name none.
type installIndex struct {
	url     string
	trusted []string
}

// WithInstallIndex makes indexURL the package index of the installs that name none (no
// InstallOptions.IndexURL: a `%pip` line or an MCP client's install too), in place of PyPI: an
// operator's own index or mirror, which the installers then reach instead of PyPI's hosts.
// It is also the one index, besides the hosts the session may reach itself, that a cell's
// `%pip` line may name (see cellIndex); without it, PyPI's. trustedHosts are pip's --trusted-host for it (an http:// index needs its host there).
func WithInstallIndex(indexURL string, trustedHosts ...string) Option {
	return func(o *options) { o.installIndex = installIndex{url: indexURL, trusted: trustedHosts} }
}

// built says whether a requirement would need a build: a path or URL that is not a wheel.
func built(req string) bool {
	if strings.HasSuffix(strings.ToLower(strings.TrimSpace(req)), ".whl") {
		return false
	}
	return strings.ContainsAny(req, "/\\") || strings.HasPrefix(req, ".") || strings.Contains(req, "://") || strings.Contains(req, " @ ")
}

var pipOption = regexp.MustCompile(`^-`)

// Install installs Python packages into the session's virtual environment (PackagesDir) with
// pip, in a short-lived installer container of the session's image that has the session's
// workspace volume mounted and then exits. The installer reaches only the hosts of its index
// URLs (PyPI's without one), through an egress proxy of its own that is removed with it; the
// session itself keeps its network setting (none by default) and its allowed hosts. The session's interpreter can import them at once, without
// a restart. It works on a running or a stopped session.
func (c *Client) Install(ctx context.Context, name string, o InstallOptions) error {
	inst, ok := c.eng.(engine.Installer)
	if !ok {
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
	if o.cell {
		if err := c.cellIndex(name, st, o); err != nil {
			return err
		}
	}
	o.AllowBuilds = o.AllowBuilds || c.installBuilds
	if o.IndexURL == "" && c.installIndex.url != "" {
		o.IndexURL = c.installIndex.url
		o.TrustedHosts = append(o.TrustedHosts, c.installIndex.trusted...)
	}
	allow, err := indexHosts(o)
	if err != nil {
		return err
	}
	if !o.AllowBuilds {
		for _, p := range o.Packages {
			if built(p) {
				return advice.Errorf("%w package %q: installing it would build it, which runs its code; give a wheel (.whl), or %s", ErrInvalid, p, advice.Words{Lib: "set InstallOptions.AllowBuilds", CLI: "give --allow-builds"})
			}
		}
	}
	args := []string{"install", "--no-input", "--disable-pip-version-check", "--no-warn-script-location"}
	if !o.AllowBuilds {
		args = append(args, "--only-binary", ":all:")
	}
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
	// Nothing of the workspace runs: the image's own interpreter and pip, in a venv of the
	// installer's own /tmp (-I: no working folder, user site or PYTHON* variables on the path),
	// installing into the session venv's prefix; the session's code may have written anything
	// there, .venv/bin/python and .pth files included. (A venv, so that the prefix has a venv's
	// layout, lib/pythonX.Y/site-packages: outside one, Debian's pip installs a prefix's packages
	// under local/.) The session's venv sees the image's own packages (numpy, pandas...), and
	// pip installs beside them. The scripts pip writes name the session venv's interpreter.
	script := `set -e
if [ ! -e "$VENV/pyvenv.cfg" ]; then /usr/bin/python3 -I -m venv --system-site-packages --without-pip "$VENV"; fi
/usr/bin/python3 -I -m venv --system-site-packages --without-pip /tmp/installer
if [ -n "$RUNTIMECTL_REQUIREMENTS" ]; then printf '%s\n' "$RUNTIMECTL_REQUIREMENTS" > /tmp/requirements.txt; fi
: > /tmp/.before
set +e
/tmp/installer/bin/python -I -m pip "$@" --prefix "$VENV"
rc=$?
find "$VENV/bin" -maxdepth 1 -type f -newer /tmp/.before -exec sed -i "1s|^#!/tmp/installer/bin/python\$|#!$VENV/bin/python|" {} + 2>/dev/null
exit $rc`
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	tail := &Tail{Max: 2048}
	w := io.MultiWriter(out, tail)
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = engine.InstallTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	code, err := inst.Install(ctx, engine.InstallJob{
		Image: st.Image, Session: name, Runtime: st.Runtime, Deadline: deadline, Egress: c.installEgress(name, st.Image, allow),
		Argv: append([]string{"/bin/sh", "-c", script, "sh"}, args...),
		Env: []string{"VENV=" + PackagesDir, "HOME=/tmp", "PIP_CACHE_DIR=/tmp/pip-cache", "PIP_CONFIG_FILE=/dev/null",
			"RUNTIMECTL_REQUIREMENTS=" + o.Requirements},
	}, w)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("install into session %q: it did not end within its deadline; the installer was stopped", name)
		}
		if errors.Is(err, engine.ErrNotFound) {
			return fmt.Errorf("install into session %q: its image %s is gone: %w", name, st.Image, err)
		}
		return fmt.Errorf("install into session %q: %w", name, err)
	}
	if code == 137 && time.Now().After(deadline.Add(-2*time.Second)) {
		return fmt.Errorf("install into session %q: it did not end within its deadline (%s); the installer was stopped", name, timeout.Round(time.Second))
	}
	if code != 0 {
		if !o.AllowBuilds && strings.Contains(tail.String(), "No matching distribution") {
			return advice.Errorf("install into session %q: pip exited with code %d: %s (only wheels are installed unless builds are allowed: %s)", name, code, lastLine(tail.String()), advice.Words{Lib: "set InstallOptions.AllowBuilds", CLI: "give --allow-builds"})
		}
		if refused(tail.String()) {
			return fmt.Errorf("install into session %q: pip exited with code %d: %s (the installer reaches only %s: the hosts of --index-url and --extra-index-url, or PyPI's without them)", name, code, lastLine(tail.String()), strings.Join(allow, ", "))
		}
		return fmt.Errorf("install into session %q: pip exited with code %d: %s", name, code, lastLine(tail.String()))
	}
	return nil
}

// PyPIHosts are what an install without --index-url reaches: PyPI's index and its files.
var PyPIHosts = []string{"pypi.org", "files.pythonhosted.org"}

// indexHosts are the allowlist of an install's egress proxy: the hosts of its index URLs,
// each with the port the URL names (none: 80 and 443), and PyPI's (PyPIHosts) when it names no
// --index-url, as pip then uses PyPI; an index on pypi.org brings files.pythonhosted.org,
// where PyPI's files are. A host given as an address is allowed as that address, even one the
// proxies refuse otherwise (the engine's host, link-local): the operator named it.
func indexHosts(o InstallOptions) ([]string, error) {
	var hosts []string
	if o.IndexURL == "" {
		hosts = append(hosts, PyPIHosts...)
	}
	for i, raw := range append([]string{o.IndexURL}, o.ExtraIndexURLs...) {
		if raw == "" && i == 0 {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return nil, fmt.Errorf("%w index URL %q: give an http:// or https:// URL of a package index (the installer reaches only the hosts of its index URLs)", ErrInvalid, raw)
		}
		host := u.Hostname()
		if u.Port() != "" {
			p, _ := strconv.Atoi(u.Port())
			host = egress.HostPort(host, p)
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		hosts = append(hosts, host)
		if strings.EqualFold(u.Hostname(), "pypi.org") {
			hosts = append(hosts, "files.pythonhosted.org")
		}
	}
	list, err := egress.ParseAllowHosts(hosts)
	if err != nil {
		return nil, fmt.Errorf("%w index URL: %v", ErrInvalid, err)
	}
	return list.Strings(), nil
}

// cellIndex refuses the index URLs of a cell's install (a `%pip` line) on hosts that are
// neither the operator's index (WithInstallIndex's host, or PyPI's without one) nor hosts the
// session may reach itself (its allowed hosts): the cell is code a model wrote, and an index
// URL of its choosing would carry the session's data out, even from a session without network.
// Explicit installs (Client.Install, `session install`, the server's route) take any index.
func (c *Client) cellIndex(name string, st Settings, o InstallOptions) error {
	operator, err := indexHosts(InstallOptions{IndexURL: c.installIndex.url})
	if err != nil {
		return err
	}
	opList, err := egress.ParseAllowHosts(operator)
	if err != nil {
		return fmt.Errorf("%w install index: %v", ErrInvalid, err)
	}
	sessList, err := egress.ParseAllowHosts(st.AllowHosts)
	if err != nil {
		return fmt.Errorf("%w session %q's allowed hosts: %v", ErrInvalid, name, err)
	}
	for _, raw := range append([]string{o.IndexURL}, o.ExtraIndexURLs...) {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return fmt.Errorf("%w index URL %q: give an http:// or https:// URL of a package index (the installer reaches only the hosts of its index URLs)", ErrInvalid, raw)
		}
		port := 443
		if u.Scheme == "http" {
			port = 80
		}
		if u.Port() != "" {
			port, _ = strconv.Atoi(u.Port())
		}
		if opList.Allows(u.Hostname(), port) || sessList.Allows(u.Hostname(), port) {
			continue
		}
		host := u.Host
		allowed := "the install index " + strings.Join(operator, ", ")
		if len(st.AllowHosts) > 0 {
			allowed += " and the session's allowed hosts " + strings.Join(st.AllowHosts, ", ")
		}
		return advice.Errorf("%w index host %s in a %%pip line: a cell's install may use only %s; %s", ErrInvalid, host, allowed,
			advice.Words{
				Lib: fmt.Sprintf("install from that index with Client.Install(ctx, %q, InstallOptions{IndexURL: ...}), or start the session with AllowHosts %s, or make the Client WithInstallIndex(URL)", name, host),
				CLI: fmt.Sprintf("install from that index with `runtimectl session install %s PKG --index-url URL`, or start the session with --allow-host %s, or make an index the operator's with `runtimectl serve --install-index URL` (a global flag)", name, host),
			})
	}
	return nil
}

// installEgress is the egress proxy of an install into session name: it allows the index's
// hosts (allow) and nothing else, and is made as the Client's proxies are (EgressOptions, the
// engine host's addresses refused), apart from the session's own proxy, which it never widens.
func (c *Client) installEgress(name, image string, allow []string) *engine.EgressSpec {
	o := c.egress
	cfg := egress.Config{
		Session: name, Who: "the installer of session " + name, AllowFlag: "an --index-url or --extra-index-url on",
		Allow: allow, Hosts: o.Hosts, UpstreamCAs: o.UpstreamCAs, Deny: append(c.hostAddrs(), o.Deny...),
	}
	return &engine.EgressSpec{Session: name, Image: image, Config: cfg, Network: o.Network}
}

// refused reports whether pip's output says a connection was refused by the installer's proxy.
func refused(out string) bool {
	for _, s := range []string{"runtimectl egress", "ProxyError", "Tunnel connection failed", "403"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
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

// lastLine returns the last line of pip's output that says something: its last ERROR line,
// else its last line (pip's stdout, buffered, may come after its stderr).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "ERROR:") {
			return l
		}
	}
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
		o := InstallOptions{cell: true}
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
