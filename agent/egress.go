package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
)

// systemBundle is where Debian keeps the system's CA certificates.
const systemBundle = "/etc/ssl/certs/ca-certificates.crt"

// StartEgress starts the session's side of egress for a session with allowed hosts: the relay
// on loopback (bound before it returns, so before the interpreter starts: no code can take its
// ports first), relaying to the proxy at target (unix:PATH or tcp:HOST:PORT; "" is
// contract.EgressSocket) until ctx ends. When the proxy has a CA for the session's secret
// headers it writes the trust bundle (contract.EgressTrustBundle). It returns the interpreter's
// environment for egress (contract.EgressEnv).
func StartEgress(ctx context.Context, allowHosts []string, target string, log *slog.Logger) ([]string, error) {
	allow, err := egress.ParseAllowHosts(allowHosts)
	if err != nil {
		return nil, err
	}
	if target == "" {
		target = "unix:" + contract.EgressSocket
	}
	dial, err := egress.Dialer(target)
	if err != nil {
		return nil, err
	}
	relay, err := egress.ListenRelay(egress.RelayConfig{Addr: egress.AnswerAddr, Ports: allow.Ports(), Dial: dial, Log: log})
	if err != nil {
		return nil, err
	}
	go relay.Serve(ctx)
	ca, err := fetchCA(ctx, dial)
	if err != nil {
		log.Warn("egress: no CA from the proxy; HTTPS to the hosts of secret headers will not be trusted", "err", err)
		return contract.EgressEnv(false), nil
	}
	if len(ca) == 0 {
		return contract.EgressEnv(false), nil
	}
	if err := writeTrustBundle(contract.EgressTrustBundle, systemBundle, ca); err != nil {
		log.Warn("egress: trust bundle", "err", err)
		return contract.EgressEnv(false), nil
	}
	return contract.EgressEnv(true), nil
}

// fetchCA asks the proxy for the session's CA, waiting a while for a proxy that is starting.
func fetchCA(ctx context.Context, dial func(context.Context) (net.Conn, error)) ([]byte, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		ca, err := egress.FetchCA(ctx, dial)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return ca, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeTrustBundle writes the system's CA certificates and the session's egress CA where the
// interpreter's tools are told to look (readable by the session user, writable by root only).
func writeTrustBundle(path, system string, ca []byte) error {
	sys, err := os.ReadFile(system)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var b bytes.Buffer
	b.Write(sys)
	if len(sys) > 0 && !bytes.HasSuffix(sys, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.Write(ca)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}
