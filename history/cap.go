package history

import (
	"fmt"
	"unicode/utf8"
)

// CapOutput bounds the output of one execution. When len(s) > max it keeps
// the first max/2 and the last max/2 bytes, each cut back to a UTF-8
// boundary where the text is valid UTF-8 there, joined by a marker line such
// as "\n[... 12345 bytes of output omitted ...]\n"; dropped is the number of
// bytes of s left out. The marker is not counted in max. A max of 0 or less
// means no cap.
func CapOutput(s string, max int) (capped string, dropped int64) {
	if max <= 0 || len(s) <= max {
		return s, 0
	}
	// Do not split a multi-byte character: move each cut outwards, into
	// the omitted part, to the edge of the character it falls in.
	headEnd, _ := runeAround(s, max/2)
	_, tailStart := runeAround(s, len(s)-max/2)
	dropped = int64(tailStart - headEnd)
	return s[:headEnd] + fmt.Sprintf("\n[... %d bytes of output omitted ...]\n", dropped) + s[tailStart:], dropped
}

// runeAround returns the bounds of the valid UTF-8 character that byte i of
// s falls inside of, or i, i when i is at a character boundary or the bytes
// around it are not valid UTF-8.
func runeAround(s string, i int) (start, end int) {
	if i <= 0 || i >= len(s) || utf8.RuneStart(s[i]) {
		return i, i
	}
	for p := i - 1; p >= 0 && p > i-utf8.UTFMax; p-- {
		if !utf8.RuneStart(s[p]) {
			continue
		}
		r, size := utf8.DecodeRuneInString(s[p:])
		if (r != utf8.RuneError || size > 1) && p+size > i {
			return p, p + size
		}
		break
	}
	return i, i
}
