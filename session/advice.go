package session

import "github.com/runtimectl/runtimectl/internal/advice"

// The remedies the package's errors name, in the library's words (what Error says) and in the
// command line's (what the CLI prints; see internal/advice).

func adviseStart(name string) advice.Words {
	return advice.Words{Lib: "start it first (Client.Start)", CLI: "start it with `runtimectl session start " + name + "`"}
}

func adviseStopOrForce(name string) advice.Words {
	return advice.Words{Lib: "stop it first (Session.Stop), or force it", CLI: "stop it first (`runtimectl session stop " + name + "`) or use --force"}
}

func adviseRemove(name string) advice.Words {
	return advice.Words{Lib: "remove it first (Client.Remove with force)", CLI: "remove it with `runtimectl session rm --force " + name + "`"}
}

func adviseRemoveVolume(vol string) advice.Words {
	return advice.Words{Lib: "remove that volume (Client.Storage().Remove)", CLI: "remove it with `runtimectl volume rm " + vol + "`"}
}

func adviseSnapshots(name string) advice.Words {
	return advice.Words{Lib: "list them with Session.Snapshots", CLI: "list them with `runtimectl session snapshots " + name + "`"}
}

func adviseHistory(name string) advice.Words {
	return advice.Words{Lib: "see Session.History", CLI: "see `runtimectl session history " + name + "`"}
}

// flag is a setting as Spec names it and as the command line's flag does.
func flag(field, cliFlag string) advice.Words { return advice.Words{Lib: field, CLI: cliFlag} }
