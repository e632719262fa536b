package agent

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/runtimectl/runtimectl/execproto"
)

// listFiles walks the workspace (not the runtime's own state) and returns the newest files
// first, at most limit of them, with the totals of all.
func listFiles(workdir, stateDir string, limit int) execproto.FilesReply {
	var rep execproto.FilesReply
	var all []execproto.File
	_ = filepath.WalkDir(workdir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip, the listing is a summary
		}
		if p == stateDir || strings.HasPrefix(p, stateDir+string(filepath.Separator)) {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(workdir, p)
		all = append(all, execproto.File{Path: filepath.ToSlash(rel), Size: info.Size(), Modified: info.ModTime().UTC()})
		rep.TotalSize += info.Size()
		return nil
	})
	sort.Slice(all, func(i, j int) bool { return all[i].Modified.After(all[j].Modified) })
	rep.Total = len(all)
	if len(all) > limit {
		all = all[:limit]
	}
	rep.Files = all
	if rep.Files == nil {
		rep.Files = []execproto.File{}
	}
	return rep
}
