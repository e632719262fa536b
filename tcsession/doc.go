// Package tcsession is a testcontainers-go module for runtimectl: a real, hardened, stateful
// session in a Go test, the way testcontainers' modules give a Postgres or a Redis.
//
//	c, err := tcsession.Run(ctx, "runtimectl/python:latest",
//		tcsession.WithLanguage("python"), tcsession.WithMemory("512m"))
//	testcontainers.CleanupContainer(t, c)
//	require.NoError(t, err)
//	res, err := c.RunCode(ctx, "x = 40 + 2\nx") // *session.Result; *res.Result is "42"
//	s, err := c.Session(ctx)                    // the full *session.Session
//
// The container is created by testcontainers-go (its request, lifecycle hooks and wait
// strategy) from the configuration that `runtimectl session start` creates: the same hardened
// HostConfig and labels (package containers builds both), the same volumes (package session
// creates them), so `runtimectl session ls` lists it and session.Client opens it. It is ready
// when its agent answers its hello. Terminate removes the container and the session's volumes
// (WithKeepVolume keeps them). It works with testcontainers' reaper (Ryuk), whose labels the
// volumes carry too, and with TESTCONTAINERS_RYUK_DISABLED=true, where Terminate (or
// testcontainers.CleanupContainer) is what cleans up.
//
// Run never pulls a runtimectl image: a missing one is an error that says how to build it
// (`runtimectl image build LANG`), unless WithBuild is given, which builds it from the
// Dockerfiles embedded in this module.
//
// Imports: testcontainers-go, session (the library) and the Docker engine (docker, containers
// for the hardened configuration, images), contract, lang. It is Docker's only: its containers
// are testcontainers-go's.
package tcsession
