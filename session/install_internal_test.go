package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPipLinesBecomeInstalls(t *testing.T) {
	code := "import os\n%pip install -q tinypkg==1.0 'other>=2' --index-url http://h:1/simple --trusted-host h\nif True:\n    !pip install --no-deps x\nprint('%pip install not-a-line')"
	got, installs, err := pipLines(code)
	require.NoError(t, err)
	require.Len(t, installs, 2)
	assert.Equal(t, []string{"tinypkg==1.0", "other>=2"}, installs[0].Packages)
	assert.Equal(t, "http://h:1/simple", installs[0].IndexURL)
	assert.Equal(t, []string{"h"}, installs[0].TrustedHosts)
	assert.True(t, installs[1].NoDeps)
	assert.Equal(t, []string{"x"}, installs[1].Packages)
	assert.Equal(t, "import os\npass  # %pip install -q tinypkg==1.0 'other>=2' --index-url http://h:1/simple --trusted-host h: installed by runtimectl before this cell ran\nif True:\n    pass  # !pip install --no-deps x: installed by runtimectl before this cell ran\nprint('%pip install not-a-line')", got)

	_, _, err = pipLines("%pip install --target /x y")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "does not take --target")
	_, _, err = pipLines("%pip install -q")
	require.ErrorIs(t, err, ErrInvalid)
	same, none, err := pipLines("x = 1")
	require.NoError(t, err)
	assert.Empty(t, none)
	assert.Equal(t, "x = 1", same)
}
