package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
)

// A session with allowed hosts may reach its proxy's pod on the relay port and nothing else;
// the proxy lets in its session's pod only.
func TestEgressPolicyOpensOnlyTheProxy(t *testing.T) {
	p := EgressPolicy("ns", "My_Session", "python")
	require.Len(t, p.Spec.Egress, 1)
	assert.Empty(t, p.Spec.Ingress)
	rule := p.Spec.Egress[0]
	require.Len(t, rule.To, 1)
	assert.Nil(t, rule.To[0].IPBlock)
	assert.Nil(t, rule.To[0].NamespaceSelector, "the session's namespace only")
	assert.Equal(t, map[string]string{contract.LabelEgress: Key("My_Session"), contract.LabelSchema: contract.LabelsSchema}, rule.To[0].PodSelector.MatchLabels)
	require.Len(t, rule.Ports, 1)
	assert.Equal(t, int32(egress.RelayPort), rule.Ports[0].Port.IntVal)
	assert.Equal(t, corev1.ProtocolTCP, *rule.Ports[0].Protocol)

	pp := proxyPolicy("ns", "My_Session")
	require.Len(t, pp.Spec.Ingress, 1)
	assert.Equal(t, Key("My_Session"), pp.Spec.Ingress[0].From[0].PodSelector.MatchLabels[contract.LabelSession])
	assert.NotContains(t, EgressName("egress-x"), PodName("x"), "a proxy's name is never a session pod's")
}

func TestEgressPodResolvesOnLoopbackAndKnowsItsProxy(t *testing.T) {
	s := spec("s1")
	s.Labels = map[string]string{contract.LabelAllowHosts: "1"}
	require.True(t, wantsEgress(s))
	pod, err := Pod("ns", s, Options{})
	require.NoError(t, err)
	egressPod(pod, "10.244.0.7", false)
	assert.Equal(t, corev1.DNSNone, pod.Spec.DNSPolicy)
	assert.Equal(t, []string{"127.0.0.1"}, pod.Spec.DNSConfig.Nameservers)
	var env string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == contract.EgressProxyEnv {
			env = e.Value
		}
	}
	assert.Equal(t, "tcp:10.244.0.7:3129", env)
	// The pod's one route, set by the only container with CAP_NET_ADMIN; the agent has none.
	require.Len(t, pod.Spec.InitContainers, 2)
	pin := pod.Spec.InitContainers[1]
	assert.Equal(t, PinName, pin.Name)
	assert.Equal(t, []string{contract.EgressBinary, "pin", "10.244.0.7"}, pin.Command)
	assert.Equal(t, pod.Spec.Containers[0].Image, pin.Image)
	assert.Equal(t, []corev1.Capability{"ALL"}, pin.SecurityContext.Capabilities.Drop)
	assert.Equal(t, []corev1.Capability{"NET_ADMIN"}, pin.SecurityContext.Capabilities.Add)
	assert.False(t, *pin.SecurityContext.AllowPrivilegeEscalation)
	assert.NotContains(t, pod.Spec.Containers[0].SecurityContext.Capabilities.Add, corev1.Capability("NET_ADMIN"))
	assert.NotContains(t, pod.Spec.Containers[0].SecurityContext.Capabilities.Add, corev1.Capability("NET_RAW"))
	// EgressPolicyOnly: the policy alone, no container with CAP_NET_ADMIN.
	pod, err = Pod("ns", s, Options{EgressPolicyOnly: true})
	require.NoError(t, err)
	egressPod(pod, "10.244.0.7", true)
	require.Len(t, pod.Spec.InitContainers, 1)
	assert.Equal(t, InitName, pod.Spec.InitContainers[0].Name)

	proxy := EgressPod("ns", "s1", "img", Options{})
	c := proxy.Spec.Containers[0]
	assert.Equal(t, []string{contract.EgressBinary}, c.Command)
	assert.Empty(t, c.Env[0].Value, "the config (with the secret values) comes from the Secret")
	assert.Equal(t, EgressName("s1"), c.Env[0].ValueFrom.SecretKeyRef.Name)
	assert.False(t, *proxy.Spec.AutomountServiceAccountToken)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
}
