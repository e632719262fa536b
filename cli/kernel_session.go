package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/jupyter"
)

// defaultKernelTTL is the lifetime recorded on a session named after a connection file: no one
// can reopen it by name, so `session gc` removes it once idle this long.
const defaultKernelTTL = 24 * time.Hour

// kernelLanguage is what a kernel says of its language.
type kernelLanguage struct {
	display string
	info    jupyter.LanguageInfo
}

var kernelLanguages = map[string]kernelLanguage{
	"python": {"Python 3", jupyter.LanguageInfo{
		Name: "python", Version: "3.11", Mimetype: "text/x-python", FileExtension: ".py",
		PygmentsLexer: "ipython3", CodemirrorMode: map[string]any{"name": "ipython", "version": 3}, NbconvertExporter: "python",
	}},
	"bash": {"Bash", jupyter.LanguageInfo{
		Name: "bash", Version: "5.2", Mimetype: "text/x-sh", FileExtension: ".sh", PygmentsLexer: "bash", CodemirrorMode: "shell",
	}},
	"node": {"Node.js", jupyter.LanguageInfo{
		Name: "javascript", Version: "18", Mimetype: "application/javascript", FileExtension: ".js",
		PygmentsLexer: "javascript", CodemirrorMode: "javascript",
	}},
}

func kernelLang(name string) (kernelLanguage, error) {
	if name == "" {
		name = "python"
	}
	l, ok := kernelLanguages[name]
	if !ok {
		return l, usagef("--lang %s: a kernel is python, bash or node", name)
	}
	return l, nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9]+`)

// kernelSessionName is the session of a kernel: flag (--session), else $RUNTIMECTL_SESSION,
// else one named after the notebook ($JPY_SESSION_NAME, its path, set by Jupyter's server),
// else one named after the connection file. key is what the record of kernels files it under;
// derived says the name came from the connection file (nothing can name it again).
func kernelSessionName(flag, lang, connFile string, getenv func(string) string) (name, key string, derived bool) {
	suffix := ""
	if lang != "" && lang != "python" {
		suffix = "-" + lang
	}
	switch {
	case flag != "":
		return flag, "session:" + flag, false
	case getenv("RUNTIMECTL_SESSION") != "":
		n := getenv("RUNTIMECTL_SESSION")
		return n, "session:" + n, false
	case getenv("JPY_SESSION_NAME") != "":
		nb := getenv("JPY_SESSION_NAME")
		if abs, err := filepath.Abs(nb); err == nil && !strings.Contains(nb, "://") {
			nb = abs
		}
		key = "notebook:" + lang + ":" + nb
		if n := lookupKernel(key); n != "" {
			return n, key, false
		}
		return slugName("nb", strings.TrimSuffix(filepath.Base(nb), filepath.Ext(nb)), nb+"\x00"+lang, suffix), key, false
	}
	base := strings.TrimSuffix(filepath.Base(connFile), ".json")
	id := strings.TrimPrefix(base, "kernel-")
	h := sha256.Sum256([]byte(connFile))
	if len(id) >= 8 && unsafeName.ReplaceAllString(strings.ToLower(id[:8]), "") == strings.ToLower(id[:8]) {
		return "kernel-" + strings.ToLower(id[:8]) + suffix, "connection:" + connFile, true
	}
	return "kernel-" + hex.EncodeToString(h[:4]) + suffix, "connection:" + connFile, true
}

// slugName is prefix-SLUG-HASH: readable, unique for what was hashed, at most 63 characters.
func slugName(prefix, readable, hashed, suffix string) string {
	slug := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(readable), "-"), "-")
	if len(slug) > 40 {
		slug = strings.Trim(slug[:40], "-")
	}
	h := sha256.Sum256([]byte(hashed))
	parts := []string{prefix}
	if slug != "" {
		parts = append(parts, slug)
	}
	parts = append(parts, hex.EncodeToString(h[:4]))
	return strings.Join(parts, "-") + suffix
}

// kernelRecords is where the kernels' sessions are recorded: $RUNTIMECTL_KERNELS_FILE, else
// runtimectl/kernels.json in the user's data directory ($XDG_DATA_HOME or ~/.local/share).
func kernelRecords() string {
	if p := os.Getenv("RUNTIMECTL_KERNELS_FILE"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "runtimectl", "kernels.json")
}

// kernelRecord is one kernel's entry: which session a notebook (or connection) runs in.
type kernelRecord struct {
	Session string    `json:"session"`
	Lang    string    `json:"lang"`
	Last    time.Time `json:"last_started"`
}

func readKernelRecords() map[string]kernelRecord {
	recs := map[string]kernelRecord{}
	p := kernelRecords()
	if p == "" {
		return recs
	}
	if b, err := os.ReadFile(p); err == nil {
		_ = json.Unmarshal(b, &recs)
	}
	return recs
}

func lookupKernel(key string) string {
	return readKernelRecords()[key].Session
}

// recordKernel files the kernel's session under key (best effort: a kernel whose record cannot
// be written still runs, and says so in its log). Entries of connection files are not kept:
// no one looks them up.
func recordKernel(log *slog.Logger, key, name, lang string) {
	p := kernelRecords()
	if p == "" || strings.HasPrefix(key, "connection:") {
		return
	}
	recs := readKernelRecords()
	recs[key] = kernelRecord{Session: name, Lang: lang, Last: time.Now().UTC()}
	b, _ := json.MarshalIndent(recs, "", " ")
	tmp := p + ".tmp"
	err := os.MkdirAll(filepath.Dir(p), 0o700)
	if err == nil {
		err = os.WriteFile(tmp, append(b, '\n'), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		log.Warn("record the kernel's session", "file", p, "err", err)
	}
}
