// Package containers drives session containers through the Docker API: create (hardened),
// start, stop, remove, inspect, list by label, the exec relay that gives each client a private
// stream to the agent, and copying files in and out as tar streams.
//
// It is part of the Docker engine (package docker, which implements engine.Runtimes with it);
// with images and volumes it is where the Docker SDK is imported. Its exported types are
// engine's (Info, Spec, PathInfo, Stats are engine's types) and its errors engine's, so that
// the session package and the commands never see the SDK. It defines the subset of the Docker
// client it uses (API), so that the package's dependence on the SDK is visible in one place;
// what needs no engine (error classification) has unit tests, and the rest is tested on a real
// engine by the integration tests of session and cli. Config is the one export in the SDK's
// types: it hands the hardened configuration to tcsession, whose testcontainers-go request
// takes them, so that the hardening is written once.
package containers
