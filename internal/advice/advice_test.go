package advice

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var rm = Words{"remove it first", "remove it with `runtimectl session rm -f demo`"}

func TestErrorSaysTheLibrarysWordsAndCLITheCommandLines(t *testing.T) {
	err := Errorf("%w: session %q exists; %s", fs.ErrExist, "demo", rm)
	assert.Equal(t, `file already exists: session "demo" exists; remove it first`, err.Error())
	assert.Equal(t, "file already exists: session \"demo\" exists; remove it with `runtimectl session rm -f demo`", CLI(err))
	assert.ErrorIs(t, err, fs.ErrExist)
}

func TestCLIRewordsAnErrorWrappedByOthers(t *testing.T) {
	inner := Errorf("limits: %s must be positive", Words{"CPUs", "--cpus"})
	outer := fmt.Errorf("start demo: %w", inner)
	assert.Equal(t, "start demo: limits: CPUs must be positive", outer.Error())
	assert.Equal(t, "start demo: limits: --cpus must be positive", CLI(outer))

	var e *Error
	require.True(t, errors.As(outer, &e))
}

func TestCLIRewordsNestedAndJoinedErrors(t *testing.T) {
	inner := Errorf("no image; %s", Words{"build it first", "build it with `runtimectl image build python`"})
	mid := Errorf("start: %w; %s", inner, Words{"or name another", "or pass --image"})
	joined := errors.Join(errors.New("first"), mid)
	assert.Equal(t, "first\nstart: no image; build it first; or name another", joined.Error())
	assert.Equal(t, "first\nstart: no image; build it with `runtimectl image build python`; or pass --image", CLI(joined))
}

func TestCLIOfPlainErrorsIsTheirMessage(t *testing.T) {
	assert.Equal(t, "", CLI(nil))
	assert.Equal(t, "plain", CLI(errors.New("plain")))
	assert.Equal(t, "100%", CLI(Errorf("%d%%", 100)), "no Words: the same text")
}

func TestWordsWithPercentSignsAreNotFormatted(t *testing.T) {
	err := Errorf("at %s", Words{"50%", "--at 50%"})
	assert.Equal(t, "at 50%", err.Error())
	assert.Equal(t, "at --at 50%", CLI(err))
}
