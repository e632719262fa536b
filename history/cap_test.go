package history

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestCapOutput(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    string
		dropped int64
	}{
		{"empty", "", 10, "", 0},
		{"under", "abc", 10, "abc", 0},
		{"equal", "abcdefghij", 10, "abcdefghij", 0},
		{"one over", "abcdefghijk", 10, "abcde" + marker(1) + "ghijk", 1},
		{"odd max", "abcdefghijk", 9, "abcd" + marker(3) + "hijk", 3},
		{"max 1 keeps nothing", "abc", 1, marker(3), 3},
		{"max 0 means no cap", "abc", 0, "abc", 0},
		{"negative max means no cap", "abc", -1, "abc", 0},
		// "é" is 2 bytes, "€" is 3: cuts move outwards to keep them whole.
		{"head cut inside a rune", "aé" + strings.Repeat("x", 10) + "zz", 4, "a" + marker(12) + "zz", 12},
		{"tail cut inside a rune", "aa" + strings.Repeat("x", 10) + "€b", 4, "aa" + marker(13) + "b", 13},
		{"invalid UTF-8 is cut where it falls", "a\x80\x80\x80\x80\x80\x80b", 4, "a\x80" + marker(4) + "\x80b", 4},
		{"4-byte rune at the head cut", "a😀" + strings.Repeat("x", 10), 6, "a" + marker(11) + "xxx", 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := CapOutput(tt.in, tt.max)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.dropped, dropped)
		})
	}
}

func TestCapOutputKeepsValidUTF8(t *testing.T) {
	s := strings.Repeat("日本語€é", 1000)
	for max := 1; max < 64; max++ {
		got, dropped := CapOutput(s, max)
		assert.True(t, utf8.ValidString(got), "max %d", max)
		assert.Positive(t, dropped)
		kept := len(got) - len(marker(dropped))
		assert.Equal(t, int64(len(s)), int64(kept)+dropped, "max %d: kept + dropped = all", max)
		assert.LessOrEqual(t, kept, max, "max %d", max)
	}
}

func marker(n int64) string {
	return "\n[... " + strconv.FormatInt(n, 10) + " bytes of output omitted ...]\n"
}
