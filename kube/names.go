package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/runtimectl/runtimectl/contract"
)

// The names of the objects of a session. Kubernetes names are DNS labels or subdomains
// (lowercase letters, digits, '-'), session names may also hold '_' and '.': Key maps one to
// the other, and the exact session name travels in the AnnotationSession annotation.
const (
	// AnnotationSession carries the session's exact name on every object.
	AnnotationSession = contract.LabelSession
	// AnnotationSettings carries the session's settings (JSON) on its workspace claim.
	AnnotationSettings = contract.LabelSettings
	// ContainerName is the pod's main container, the agent.
	ContainerName = "agent"
	// InitName is the init container that gives the claims and in-memory folders their owners
	// and modes before the agent starts.
	InitName = "prepare"
	// PinName is the init container of a session with allowed hosts that leaves its pod one
	// route, to its egress proxy's pod (runtime-egress pin).
	PinName = "egress-pin"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Key returns the form of a session name that Kubernetes accepts both in object names and as a
// label value: the name itself when it is already a DNS label of at most 52 characters (so runtimectl-KEY is a valid hostname), or else
// its lowercase letters, digits and dashes (at most 43) with a short hash of the exact name, so
// that two names never share a key ("a_b" and "a.b" differ).
func Key(session string) string {
	if len(session) <= 52 && dnsLabel.MatchString(session) {
		return session
	}
	var b strings.Builder
	for _, r := range strings.ToLower(session) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > 43 {
		s = s[:43]
	}
	s = strings.Trim(s, "-")
	sum := sha256.Sum256([]byte(session))
	h := hex.EncodeToString(sum[:4])
	if s == "" {
		return h
	}
	return s + "-" + h
}

// PodName returns the name of the session's pod: runtimectl-KEY, as the container is named on
// Docker.
func PodName(session string) string { return contract.NamePrefix + Key(session) }

// VolumeName returns the name that the session's pair of claims goes by (engine.Volume.Name).
func VolumeName(session string) string { return contract.NamePrefix + Key(session) }

// WorkspaceClaim and StateClaim return the names of the session's claims.
func WorkspaceClaim(session string) string { return VolumeName(session) + "-workspace" }

// StateClaim returns the name of the claim that holds the runtime's own state.
func StateClaim(session string) string { return VolumeName(session) + "-state" }

// PolicyName returns the name of the session's NetworkPolicy.
func PolicyName(session string) string { return contract.NamePrefix + Key(session) }

// sessionLabels returns the labels of every object of a session, as on Docker.
func sessionLabels(session, lang string) map[string]string {
	return map[string]string{
		contract.LabelSession: Key(session),
		contract.LabelLang:    lang,
		contract.LabelSchema:  contract.LabelsSchema,
	}
}
