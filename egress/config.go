package egress

import (
	"encoding/json"
	"fmt"
)

// ConfigEnv is the environment variable that carries a proxy's Config (JSON) to
// `runtime-agent egress`.
const ConfigEnv = "RUNTIMECTL_EGRESS"

// The relay's preamble and the ports of the session's side.
const (
	// ProxyPort is the session's HTTP(S)_PROXY port on loopback.
	ProxyPort = 3128
	// DNSPort is the session's resolver port on loopback.
	DNSPort = 53
	// RelayPort is where the proxy takes relayed connections over TCP (Kubernetes).
	RelayPort = 3129
	// AnswerAddr is the address the proxy's resolver answers allowed names with: the session's
	// loopback, where the relay listens on the allowed ports.
	AnswerAddr = "127.0.0.1"
)

// Config is what the proxy of one session is made of. The controller builds it from the
// session's settings and the secrets it holds, and passes it in ConfigEnv.
type Config struct {
	Session string   `json:"session"`
	Allow   []string `json:"allow"` // Rule strings
	// Secrets are the headers added to requests to their hosts, with their values.
	Secrets []Secret `json:"secrets,omitempty"`
	// CACert and CAKey (PEM) are the session's CA when the controller keeps it (Kubernetes:
	// in the proxy's Secret). Otherwise, with Secrets, the proxy makes one in StateDir and
	// keeps it there for its next start.
	CACert   string `json:"ca_cert,omitempty"`
	CAKey    string `json:"ca_key,omitempty"`
	StateDir string `json:"state_dir,omitempty"`
	// UpstreamCAs (PEM) are roots the proxy trusts, beside the system's, for the hosts whose
	// TLS it terminates (the secret hosts); spliced TLS is verified by the session itself.
	UpstreamCAs string `json:"upstream_cas,omitempty"`
	// Hosts are addresses for names, looked up before the system's resolver (tests, split
	// horizons): like /etc/hosts, for the proxy only.
	Hosts map[string][]string `json:"hosts,omitempty"`
	// Deny are addresses or prefixes refused besides the built-in ones (loopback, link-local,
	// the proxy's gateways and own addresses): the engine host's addresses, as the controller
	// knows them.
	Deny []string `json:"deny,omitempty"`
	// Listen is where relayed connections come: "unix:PATH" or "tcp:ADDR".
	Listen string `json:"listen"`
	// Answer is the address DNS answers allowed names with (default AnswerAddr).
	Answer string `json:"answer,omitempty"`
	// Who and AllowFlag are how refusals name whom the proxy serves and the flag that allows
	// a host ("": "session NAME" and --allow-host): an installer's proxy says its own.
	Who       string `json:"who,omitempty"`
	AllowFlag string `json:"allow_flag,omitempty"`
}

// Secret is a header the proxy adds to requests to Host (a Rule string), with its value.
type Secret struct {
	Host   string `json:"host"`
	Header string `json:"header"`
	Value  string `json:"value"`
}

// DecodeConfig parses a Config.
func DecodeConfig(raw string) (Config, error) {
	var c Config
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return c, fmt.Errorf("egress config: %w", err)
	}
	return c, nil
}

// Encode returns the config as JSON.
func (c Config) Encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}
