// Package kube runs sessions on Kubernetes: a session is a Pod (runtimectl-NAME, the agent as
// its container's main process) plus two PersistentVolumeClaims, one for the workspace and one
// for the runtime's own state, so a deleted or evicted pod comes back on the same claims. The
// private stream to the agent is a pods/exec of `runtime-agent connect` through client-go's
// remotecommand (WebSocket first, SPDY as the fallback); files go in and out as tar streams
// through the same exec. Without a request for network, a NetworkPolicy denies all traffic to
// and from the pod.
//
// The mapping from a session's spec to Kubernetes objects (Pod, Claims, Policy) is pure
// functions, tested without a cluster; Backend drives a cluster through client-go and
// implements engine.Engine directly (its pods are engine.Runtimes, its claims engine.Storage,
// its pools engine.Pools, its proxy pods engine.Egress). It imports client-go, k8s.io/api and
// k8s.io/apimachinery, engine, contract and egress, and nothing of the Docker SDK.
package kube
