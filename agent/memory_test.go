package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func rssFileKiB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Skip("no RssFile")
	return 0
}

func TestShedMemoryPagesTheBinaryOut(t *testing.T) {
	before := rssFileKiB(t)
	ShedMemory()
	after := rssFileKiB(t)
	t.Logf("RssFile %d KiB -> %d KiB", before, after)
	if after >= before {
		t.Skip("the kernel reclaimed nothing (no MADV_PAGEOUT, or the pages are shared)")
	}
}
