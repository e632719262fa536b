package cli

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Flags may come before or after NAME and CODE; code that begins with "-" goes after --.
func TestExecArgumentsAndTheDoubleDash(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code string
		json bool
	}{
		{[]string{"demo", "x ** 2"}, "x ** 2", false},
		{[]string{"demo", "x", "--json"}, "x", true},
		{[]string{"--json", "demo", "x"}, "x", true},
		{[]string{"demo", "--json", "x"}, "x", true},
		{[]string{"demo", "--", "-(x ** 2)"}, "-(x ** 2)", false},
		{[]string{"demo", "--json", "--", "-x"}, "-x", true},
		{[]string{"--json", "demo", "--", "--x"}, "--x", true},
		{[]string{"demo", "--", "--json"}, "--json", false},
	} {
		var got *ExecOptions
		c := newCmdExec(&Factory{}, func(_ context.Context, o *ExecOptions) error { got = o; return nil })
		c.SetArgs(tc.args)
		c.SetOut(io.Discard)
		require.NoError(t, c.Execute(), "%q", tc.args)
		require.NotNil(t, got)
		assert.Equal(t, "demo", got.Name, "%q", tc.args)
		assert.Equal(t, tc.code, got.Code, "%q", tc.args)
		assert.Equal(t, tc.json, got.JSON, "%q", tc.args)
	}
}

// Without --, code that begins with "-" is a usage error that says how to give it.
func TestExecCodeThatLooksLikeAFlagSaysToUseTheDoubleDash(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-(x ** 2)"}, "unknown shorthand flag: '(' in -(x ** 2); if -(x ** 2) is code, put -- before it: runtimectl session exec demo -- '-(x ** 2)'"},
		{[]string{"demo", "-x", "--json"}, "runtimectl session exec demo -- '-x'"},
		{[]string{"demo", "--x"}, "unknown flag: --x; if --x is code, put -- before it: runtimectl session exec demo -- '--x'"},
		{[]string{"-1"}, "runtimectl session exec NAME -- '-1'"},
		{[]string{"demo", "-(it's)"}, `runtimectl session exec demo -- '-(it'\''s)'`},
		{[]string{"demo", "--", "-x", "--json"}, "everything after -- is the code, as one argument: quote it, and put flags before --"},
	} {
		c := newCmdExec(&Factory{}, func(context.Context, *ExecOptions) error {
			t.Errorf("%q ran", tc.args)
			return nil
		})
		c.SetArgs(tc.args)
		c.SetOut(io.Discard)
		c.SetErr(io.Discard)
		c.SilenceErrors, c.SilenceUsage = true, true
		err := c.Execute()
		require.Error(t, err, "%q", tc.args)
		assert.Equal(t, 2, ExitCode(err), "%q", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
}
