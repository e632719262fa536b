package jupyter

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// ConnectionInfo is a connection file, as Jupyter writes it for the kernel it starts.
type ConnectionInfo struct {
	Transport       string `json:"transport"` // tcp (default) or ipc
	IP              string `json:"ip"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name,omitempty"`
}

// ReadConnectionFile reads and checks a connection file.
func ReadConnectionFile(path string) (ConnectionInfo, error) {
	var c ConnectionInfo
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("connection file: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("connection file %s: %w", path, err)
	}
	if err := c.Check(); err != nil {
		return c, fmt.Errorf("connection file %s: %w", path, err)
	}
	return c, nil
}

// Check says what is wrong with c, if anything.
func (c *ConnectionInfo) Check() error {
	if c.Transport == "" {
		c.Transport = "tcp"
	}
	if c.Transport != "tcp" && c.Transport != "ipc" {
		return fmt.Errorf("transport %q: use tcp or ipc", c.Transport)
	}
	if c.IP == "" {
		c.IP = "127.0.0.1"
	}
	for name, p := range map[string]int{"shell_port": c.ShellPort, "iopub_port": c.IOPubPort, "stdin_port": c.StdinPort, "control_port": c.ControlPort, "hb_port": c.HBPort} {
		if p <= 0 || p > 65535 {
			return fmt.Errorf("%s %d: give a port from 1 to 65535", name, p)
		}
	}
	if _, err := NewSigner(c.SignatureScheme, c.Key); err != nil {
		return err
	}
	return nil
}

// Endpoint is the ZeroMQ address of port.
func (c ConnectionInfo) Endpoint(port int) string {
	if c.Transport == "ipc" {
		return fmt.Sprintf("ipc://%s-%d", c.IP, port)
	}
	ip := c.IP
	if strings.Contains(ip, ":") && !strings.HasPrefix(ip, "[") {
		ip = "[" + ip + "]"
	}
	if ip == "0.0.0.0" || ip == "*" {
		ip = "*"
	}
	return fmt.Sprintf("tcp://%s:%d", ip, port)
}
