package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCodeTravelsAsBase64OnlyWhenJSONCannotCarryItCheaply(t *testing.T) {
	assert.False(t, needsBase64("X=1; echo \"$X\" > out.txt"), "small, valid UTF-8: JSON only")
	assert.False(t, needsBase64("echo héllo 🙂"), "non-ASCII UTF-8 is fine in JSON")
	assert.False(t, needsBase64(strings.Repeat("x", base64Above-1)))
	assert.True(t, needsBase64(strings.Repeat("x", base64Above)), "large code")
	assert.True(t, needsBase64("printf '\xff'"), "invalid UTF-8 would become U+FFFD")
	assert.True(t, needsBase64("a\x00b"), "NUL")
}
