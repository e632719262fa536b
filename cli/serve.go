package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-connections/tlsconfig"
	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/server"
)

// ServeOptions are the flags of `runtimectl serve`.
type ServeOptions struct {
	F         *Factory
	Listen    string
	TokenFile string
	TLSCert   string
	TLSKey    string
	TLSCA     string
	Insecure  bool
	Grace     time.Duration
	Limits    server.Config
	// AllowBuilds lets installs build source distributions (session.WithInstallBuilds).
	AllowBuilds bool
}

func newCmdServe(f *Factory) *cobra.Command {
	o := &ServeOptions{F: f, Listen: "127.0.0.1:8700", Grace: 30 * time.Second}
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the session API over HTTP, for Python agents and other machines",
		Long: `Serve runtimectl's sessions over HTTP (JSON; an execution streams newline-delimited JSON
events), in the foreground: Ctrl-C or SIGTERM stops accepting, lets running requests finish
within --grace, then ends; executions still running go on in their sessions and land in their
histories. The server keeps no state: restarting it loses nothing.

Every request carries "Authorization: Bearer TOKEN", a token of --token-file: one per line,
"TOKEN NAME [admin]", '#' starts a comment, the file readable by its owner only, read again on
SIGHUP. A token sees only the sessions created with it; an admin token sees all.

The server listens on loopback (or a unix socket: --listen unix:///run/runtimectl.sock) by
default. Any other address needs TLS (--tls-cert and --tls-key; --tls-ca also requires client
certificates signed by that CA) or --insecure. The API is at /openapi.json, metrics at /metrics.`,
		Example: `  printf '%s me admin\n' "$(openssl rand -hex 24)" > tokens.txt && chmod 600 tokens.txt
  runtimectl serve --token-file tokens.txt
  runtimectl serve --listen 0.0.0.0:8700 --token-file tokens.txt --tls-cert cert.pem --tls-key key.pem
  runtimectl serve --token-file tokens.txt --install-index https://pypi.internal/simple   # %pip's index
  kill -HUP $(pidof runtimectl)     # read the token file again`,
		Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if o.TokenFile == "" {
				o.TokenFile = os.Getenv("RUNTIMECTL_TOKEN_FILE")
			}
			if o.TokenFile == "" {
				return usagef("serve needs --token-file FILE (lines `TOKEN NAME [admin]`, chmod 600); make one with: printf '%%s me admin\\n' \"$(openssl rand -hex 24)\" > tokens.txt && chmod 600 tokens.txt")
			}
			if (o.TLSCert == "") != (o.TLSKey == "") {
				return usagef("--tls-cert and --tls-key go together")
			}
			if o.TLSCA != "" && o.TLSCert == "" {
				return usagef("--tls-ca needs --tls-cert and --tls-key")
			}
			return serveRun(c.Context(), o)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Listen, "listen", o.Listen, "address to listen on: HOST:PORT, or unix:///PATH for a unix socket")
	fl.StringVar(&o.TokenFile, "token-file", "", "the tokens, one per line `TOKEN NAME [admin]` (default $RUNTIMECTL_TOKEN_FILE)")
	fl.StringVar(&o.TLSCert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	fl.StringVar(&o.TLSKey, "tls-key", "", "the certificate's key (PEM)")
	fl.StringVar(&o.TLSCA, "tls-ca", "", "require client certificates signed by this CA (PEM)")
	fl.BoolVar(&o.Insecure, "insecure", false, "allow plain HTTP on an address that is not loopback (tokens travel in clear)")
	fl.Var(durationValue{&o.Grace}, "grace", "on SIGTERM, how long running requests may go on")
	fl.Var(sizeValue{&o.Limits.MaxBody}, "max-body", "cap on a JSON request (default 16m)")
	fl.Var(sizeValue{&o.Limits.MaxUpload}, "max-upload", "cap on a file or tar sent to a session (default 256m)")
	fl.Var(sizeValue{&o.Limits.MaxDownload}, "max-download", "cap on what a read of files sends (default 256m)")
	fl.Var(sizeValue{&o.Limits.MaxOutput}, "max-output", "ceiling on an execution's max_output, per stream (default 16m); a request for more is refused (403)")
	fl.Var(sizeValue{&o.Limits.MaxRichOutputs}, "max-rich-outputs", "budget of the rich outputs (figures...) in one reply, all together (default 16m); past it they are left out, marked")
	fl.IntVar(&o.Limits.MaxTransfers, "max-transfers", 4, "file transfers (downloads, uploads, exports) one token may run at once (past it: 429)")
	fl.IntVar(&o.Limits.MaxExecs, "max-execs", 8, "executions one token may run at once (past it: 429)")
	fl.BoolVar(&o.AllowBuilds, "allow-builds", false, "let installs (install routes, %pip in cells, install_packages) build source distributions, which runs their setup code in the installer")
	fl.Var(durationValue{&o.Limits.WriteTimeout}, "write-timeout", "a client that takes longer than this to take a write is cut off (default 30s)")
	return c
}

// isLoopback says whether a listen host reaches only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serveRun(ctx context.Context, o *ServeOptions) error {
	errw := o.F.IO.Err
	tokens, err := server.LoadTokens(o.TokenFile)
	if err != nil {
		return &usageError{err}
	}
	network, addr := "tcp", o.Listen
	if p, ok := strings.CutPrefix(o.Listen, "unix://"); ok {
		network, addr = "unix", p
	} else if strings.HasPrefix(o.Listen, "/") {
		network = "unix"
	}
	var tlsConf *tls.Config
	if o.TLSCert != "" {
		opts := tlsconfig.Options{CertFile: o.TLSCert, KeyFile: o.TLSKey, CAFile: o.TLSCA}
		if o.TLSCA != "" {
			opts.ClientAuth = tls.RequireAndVerifyClientCert
		}
		if tlsConf, err = tlsconfig.Server(opts); err != nil {
			return usagef("TLS: %v", err)
		}
	}
	if network == "tcp" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return usagef("--listen %q: use HOST:PORT (127.0.0.1:8700) or unix:///PATH", o.Listen)
		}
		if !isLoopback(host) && tlsConf == nil {
			if !o.Insecure {
				return usagef("--listen %s is reachable from other machines: give --tls-cert and --tls-key (tokens would travel in clear), or --insecure if you must", o.Listen)
			}
			fmt.Fprintf(errw, "runtimectl: WARNING: serving plain HTTP on %s: tokens and code travel in clear; use --tls-cert/--tls-key\n", o.Listen)
		}
	} else {
		if st, err := os.Lstat(addr); err == nil && st.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(addr) // a socket left by a server that ended
		}
	}
	o.F.Serving = true
	o.F.InstallBuilds = o.AllowBuilds
	cl, err := o.F.Client()
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.F.Verbose > 0 {
		level = slog.LevelDebug
	}
	cfg := o.Limits
	cfg.Client, cfg.Tokens, cfg.Version = cl, tokens, Version
	cfg.Logger = slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: level}))
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen(network, addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	if network == "unix" {
		_ = os.Chmod(addr, 0o660)
		defer os.Remove(addr)
	}
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsConf)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Minute, // a large upload; each write has its own deadline
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(srv.Drain)
	where := scheme + "://" + ln.Addr().String()
	if network == "unix" {
		where = "unix://" + addr
	}
	fmt.Fprintf(errw, "runtimectl: serving on %s (%d tokens from %s); Ctrl-C stops\n", where, tokens.Len(), o.TokenFile)

	o.F.ClaimSignals()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	defer stopSweep()
	go srv.Sweep(sweepCtx)
	for {
		select {
		case err := <-served:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		case <-hup:
			if err := tokens.Reload(); err != nil {
				fmt.Fprintf(errw, "runtimectl: token file not read again, the tokens in force stay: %v\n", err)
			} else {
				fmt.Fprintf(errw, "runtimectl: token file read again: %d tokens\n", tokens.Len())
			}
		case <-ctx.Done():
			return shutdown(hs, srv, o.Grace, errw, served)
		case <-o.F.Signals:
			return shutdown(hs, srv, o.Grace, errw, served)
		}
	}
}

// shutdown stops accepting, lets running requests go on for grace, then ends the streams that
// remain (their executions go on in the sessions) and closes every connection.
func shutdown(hs *http.Server, srv *server.Server, grace time.Duration, errw interface{ Write([]byte) (int, error) }, served chan error) error {
	fmt.Fprintf(errw, "runtimectl: stopping: no new requests; running ones have %s to finish\n", grace)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := hs.Shutdown(ctx)
	if err != nil {
		// Past the grace: streams end with a "detached" event; executions go on in their
		// sessions and land in their histories.
		srv.Detach()
		time.Sleep(500 * time.Millisecond)
		_ = hs.Close()
		fmt.Fprintln(errw, "runtimectl: grace over: open streams were ended; their executions go on in their sessions")
	}
	<-served
	fmt.Fprintln(errw, "runtimectl: stopped")
	return nil
}
