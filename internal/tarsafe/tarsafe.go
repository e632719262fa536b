// Package tarsafe extracts tar streams into a host directory without ever writing or reading
// outside it, and builds tar streams of host files for a session. Every entry is checked on
// its own: no absolute names, no "..", no links whose target leaves the destination, no
// devices. What it refuses it names in the error; nothing outside the destination is touched.
// Standard library only.
package tarsafe

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/runtimectl/runtimectl/internal/advice"
)

// ErrUnsafe is returned for an entry that would escape the destination.
var ErrUnsafe = errors.New("unsafe tar entry")

// Filter decides whether an entry (by its cleaned, slash-separated name) is extracted.
type Filter func(name string, h *tar.Header) bool

// DefaultMaxBytes is the total size that an extraction writes unless told otherwise.
const DefaultMaxBytes = 4 << 30

// ErrTooLarge is an extraction that would write more than its budget.
var ErrTooLarge = errors.New("larger than the size budget")

// ErrTooDeep is a tree with folders so deep that the engine's archive may have left files out.
var ErrTooDeep = errors.New("too deep for the engine's archive")

// ArchivePathLimit is the length of a folder's path in a session past which the Docker
// engine's archive (docker cp, the copy API) may have left out files below it, without a word:
// it skips every file whose path on the host passes PATH_MAX (4096 bytes), and the host path
// also holds the volume's own (/var/lib/docker/volumes/NAME/_data) and the file's name.
const ArchivePathLimit = 3500

// Deep reports whether a folder at the session path dir may have lost files in an archive.
func Deep(dir string) bool { return len(dir) >= ArchivePathLimit }

// TooDeep is the ErrTooDeep of the folders deep (not empty) that Deep found; callers add what
// to do.
func TooDeep(deep []string) error {
	return fmt.Errorf("%w: %d folder(s) at %d characters or more (%s), below which the engine may have left files out", ErrTooDeep, len(deep), ArchivePathLimit, shorten(deep[0]))
}

// Options tune an extraction.
type Options struct {
	// Rename, when not empty, replaces the first path element of every entry (docker cp's
	// "copy as a new name").
	Rename string
	// Keep, when set, says which entries are extracted.
	Keep Filter
	// MaxBytes bounds the total size of the regular files written (0: DefaultMaxBytes; a
	// negative value: no bound). Each entry's size is checked before it is written.
	MaxBytes int64
	// Base is the session path that the entries' names are relative to (the copied path's
	// folder). When set, a folder deeper than ArchivePathLimit fails the extraction with
	// ErrTooDeep (after it, so that the error names them all), unless SkipDeep, which passes
	// each such folder to OnDeep and keeps what arrived.
	Base     string
	SkipDeep bool
	OnDeep   func(dir string)
	// Owner, when above 0, refuses every entry whose owner (the header's uid) is another:
	// what a copy out of a session reads is the session user's own, never the runtime's
	// root-owned state that a link swapped in at the last moment would lead to.
	Owner int
}

// Extract reads tar entries from r and writes them under dst, which must exist (see Options
// for rename and keep). It returns the number of regular files written.
func Extract(r io.Reader, dst, rename string, keep Filter) (int, error) {
	return ExtractWith(r, dst, Options{Rename: rename, Keep: keep})
}

// ExtractWith is Extract with options. Runs of zeros are written as holes, so a sparse file
// stays sparse on the host. When it fails (an unsafe entry, the budget, a write error), it
// removes what it created before returning the error: nothing half-copied is left behind
// (files it replaced stay replaced).
func ExtractWith(r io.Reader, dst string, o Options) (n int, err error) {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return 0, fmt.Errorf("open destination %s: %w", dst, err)
	}
	defer root.Close()
	budget := o.MaxBytes
	if budget == 0 {
		budget = DefaultMaxBytes
	}
	x := &extraction{root: root}
	defer func() {
		if err != nil {
			x.undo()
			n = 0
		}
	}()
	tr := tar.NewReader(r)
	var written int64
	var deep []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			if len(deep) > 0 && !o.SkipDeep {
				return x.files, advice.Errorf("%w; move them higher up in the session, or %s to copy the rest", TooDeep(deep), advice.Words{Lib: "set CopyOptions.SkipDeep", CLI: "give --skip-unreadable"})
			}
			return x.files, recheckLinks(root, x.links)
		}
		if err != nil {
			return x.files, fmt.Errorf("read tar: %w", err)
		}
		name, err := CleanName(h.Name)
		if err != nil {
			return x.files, err
		}
		if o.Rename != "" {
			if _, rest, _ := strings.Cut(name, "/"); rest == "" {
				name = o.Rename
			} else {
				name = o.Rename + "/" + rest
			}
		}
		if o.Base != "" && h.Typeflag == tar.TypeDir {
			if dir := path.Join(o.Base, strings.TrimSuffix(h.Name, "/")); Deep(dir) {
				deep = append(deep, dir)
				if o.SkipDeep && o.OnDeep != nil {
					o.OnDeep(dir)
				}
			}
		}
		if o.Keep != nil && !o.Keep(name, h) {
			continue
		}
		if o.Owner > 0 && h.Uid != o.Owner {
			return x.files, fmt.Errorf("%w: %s belongs to uid %d, not to the session's user (%d): it is not the session's own (a link that leads out of the workspace?)", ErrUnsafe, name, h.Uid, o.Owner)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := x.mkdirAll(name); err != nil {
				return x.files, err
			}
		case tar.TypeReg, tar.TypeRegA:
			if budget > 0 && written+h.Size > budget {
				return x.files, advice.Errorf("%w: %s (%d bytes) after %d bytes would pass the budget of %d bytes; give a larger %s to copy it (nothing was kept)", ErrTooLarge, name, h.Size, written, budget, advice.Words{Lib: "CopyOptions.MaxSize", CLI: "--max-size"})
			}
			if err := x.mkdirAll(path.Dir(name)); err != nil {
				return x.files, err
			}
			if err := x.writeFile(name, os.FileMode(h.Mode).Perm()&^0o022|0o600, tr, h.Size); err != nil {
				return x.files, err
			}
			written += h.Size
		case tar.TypeSymlink:
			if err := checkLink(root, name, h.Linkname); err != nil {
				return x.files, err
			}
			if err := x.mkdirAll(path.Dir(name)); err != nil {
				return x.files, err
			}
			if err := root.Symlink(h.Linkname, filepath.FromSlash(name)); err != nil {
				return x.files, fmt.Errorf("link %s: %w", name, err)
			}
			x.created = append(x.created, name)
			x.links = append(x.links, name)
		case tar.TypeLink:
			target, err := CleanName(h.Linkname)
			if err != nil {
				return x.files, fmt.Errorf("%w: hard link %s -> %s leaves the destination", ErrUnsafe, name, h.Linkname)
			}
			if o.Rename != "" {
				if _, rest, ok := strings.Cut(target, "/"); ok {
					target = o.Rename + "/" + rest
				} else {
					target = o.Rename
				}
			}
			if err := root.Link(filepath.FromSlash(target), filepath.FromSlash(name)); err != nil {
				return x.files, fmt.Errorf("link %s: %w", name, err)
			}
			x.created = append(x.created, name)
			// A hard link to a symlink is another symlink (linkat does not follow it), in
			// another folder: it is checked from where it is.
			if fi, err := root.Lstat(filepath.FromSlash(name)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				t, err := root.Readlink(filepath.FromSlash(name))
				if err != nil {
					return x.files, fmt.Errorf("link %s: %w", name, err)
				}
				if err := checkLink(root, name, t); err != nil {
					return x.files, err
				}
				x.links = append(x.links, name)
			}
		default:
			return x.files, fmt.Errorf("%w: %s is a %s, not a file, folder or link", ErrUnsafe, name, typeName(h.Typeflag))
		}
	}
}

// shorten keeps the start and end of a long path, for a message.
func shorten(p string) string {
	if len(p) <= 120 {
		return p
	}
	return p[:60] + "..." + p[len(p)-50:]
}

// extraction records what an extraction created, to undo it when it fails.
type extraction struct {
	root    *os.Root
	created []string // in the order made: parents before their children
	links   []string
	files   int
}

// mkdirAll makes the folder name and its missing parents, recording those it made.
func (x *extraction) mkdirAll(name string) error {
	if name == "." || name == "" {
		return nil
	}
	acc := ""
	for _, el := range strings.Split(name, "/") {
		acc = joinRaw(acc, el)
		if _, err := x.root.Lstat(filepath.FromSlash(acc)); err == nil {
			continue
		}
		if err := x.root.Mkdir(filepath.FromSlash(acc), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", acc, err)
		}
		x.created = append(x.created, acc)
	}
	return nil
}

// writeFile writes size bytes of r as the file name, seeking over runs of zeros (holes). A
// file that is there already is replaced only once the new one is whole (written beside it,
// then renamed over it).
func (x *extraction) writeFile(name string, mode os.FileMode, r io.Reader, size int64) error {
	target := filepath.FromSlash(name)
	dest := target
	_, lerr := x.root.Lstat(target)
	if lerr == nil {
		dest = filepath.Join(filepath.Dir(target), fmt.Sprintf(".%s.runtimectl-%d", filepath.Base(target), os.Getpid()))
	}
	f, err := x.root.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	err = copySparse(f, r, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && dest != target {
		err = x.root.Rename(dest, target)
	}
	if err != nil {
		if dest != target {
			_ = x.root.Remove(dest)
		}
		if lerr != nil {
			_ = x.root.Remove(target)
		}
		return fmt.Errorf("write %s: %w", name, err)
	}
	if lerr != nil {
		x.created = append(x.created, name)
	}
	x.files++
	return nil
}

// copySparse copies size bytes from r to f, leaving holes where whole blocks are zero.
func copySparse(f *os.File, r io.Reader, size int64) error {
	const block = 64 << 10
	buf := make([]byte, block)
	var off int64
	for off < size {
		n, err := io.ReadFull(r, buf[:min(block, size-off)])
		if n > 0 {
			if allZero(buf[:n]) {
				if _, err := f.Seek(int64(n), io.SeekCurrent); err != nil {
					return err
				}
			} else if _, err := f.Write(buf[:n]); err != nil {
				return err
			}
			off += int64(n)
		}
		if err != nil {
			return err
		}
	}
	return f.Truncate(size) // a hole at the end has no block to mark its length
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// undo removes what the extraction created, children before their parents.
func (x *extraction) undo() {
	for i := len(x.created) - 1; i >= 0; i-- {
		_ = x.root.Remove(filepath.FromSlash(x.created[i]))
	}
}

// CleanName checks a tar entry name and returns it cleaned: relative, slash-separated, and
// without "..". A backslash is an ordinary character of a name, except on hosts where it
// separates paths.
func CleanName(name string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	if n == "" || n == "." || n == "./" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafe)
	}
	if strings.HasPrefix(n, "/") || (filepath.Separator == '\\' && strings.Contains(n, "\\")) || strings.ContainsRune(n, 0) {
		return "", fmt.Errorf("%w: %q is absolute or malformed", ErrUnsafe, name)
	}
	c := path.Clean(n)
	if !filepath.IsLocal(filepath.FromSlash(c)) {
		return "", fmt.Errorf("%w: %q leaves the destination", ErrUnsafe, name)
	}
	for _, el := range strings.Split(n, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: %q contains ..", ErrUnsafe, name)
		}
	}
	return c, nil
}

// checkLink refuses a symlink at name whose target resolves outside the destination, with
// every link already in the destination followed as the host will follow it (a lexical check
// is not enough: with u -> ../../.., the target u/../.. climbs from where u leads).
func checkLink(root *os.Root, name, target string) error {
	if path.IsAbs(target) {
		return fmt.Errorf("%w: symlink %s -> %s points outside the destination", ErrUnsafe, name, target)
	}
	if !linkStaysInside(root, name, target) {
		return fmt.Errorf("%w: symlink %s -> %s points outside the destination (following the links it goes through)", ErrUnsafe, name, target)
	}
	return nil
}

func linkStaysInside(root *os.Root, name, target string) bool {
	dir, ok := resolve(root, path.Dir(name), 0)
	if !ok {
		return false
	}
	_, ok = resolve(root, joinRaw(dir, target), 0)
	return ok
}

// recheckLinks checks every link the extraction made once all of them exist (a link made
// later can change where an earlier one leads); one that now leads outside is removed, and
// the error names it.
func recheckLinks(root *os.Root, links []string) error {
	var bad []string
	for changed := true; changed; {
		changed = false
		for _, name := range links {
			target, err := root.Readlink(filepath.FromSlash(name))
			if err != nil || linkStaysInside(root, name, target) {
				continue
			}
			if err := root.Remove(filepath.FromSlash(name)); err != nil {
				return fmt.Errorf("remove symlink %s, which points outside the destination: %w", name, err)
			}
			bad = append(bad, name+" -> "+target)
			changed = true
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: symlinks that point outside the destination through other links, removed: %s", ErrUnsafe, strings.Join(bad, ", "))
	}
	return nil
}

// resolve follows p (slash-separated, relative to root, not cleaned: ".." climbs from where the
// path so far really leads) through the links that exist under root, and returns where it
// leads; ok is false when it would leave root, goes through an absolute link, or through more
// than 40 links. Components that do not exist are taken as folders.
func resolve(root *os.Root, p string, hops int) (string, bool) {
	if hops > 40 {
		return "", false
	}
	parts := strings.Split(p, "/")
	cur := ""
	for i, el := range parts {
		switch el {
		case "", ".":
			continue
		case "..":
			if cur == "" {
				return "", false
			}
			if cur = path.Dir(cur); cur == "." {
				cur = ""
			}
			continue
		}
		next := joinRaw(cur, el)
		fi, err := root.Lstat(filepath.FromSlash(next))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		t, err := root.Readlink(filepath.FromSlash(next))
		if err != nil || path.IsAbs(t) {
			return "", false
		}
		return resolve(root, joinRaw(joinRaw(cur, t), strings.Join(parts[i+1:], "/")), hops+1)
	}
	return cur, true
}

// joinRaw joins two slash-separated paths without cleaning them.
func joinRaw(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "/" + b
}

func typeName(t byte) string {
	switch t {
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "named pipe"
	}
	return fmt.Sprintf("tar type %q", t)
}

// Write writes a tar of the host file or folder src to w, with every entry named under
// prefix (slash-separated, relative) and owned by uid:gid. Symlinks are refused unless they
// stay inside src; other special files are refused. Parent folders of prefix are included
// (owned by uid:gid) so that extraction creates them.
func Write(w io.Writer, src, prefix string, uid, gid int) error {
	prefix, err := CleanName(prefix)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	// Parents of the destination name.
	if dir := path.Dir(prefix); dir != "." {
		acc := ""
		for _, el := range strings.Split(dir, "/") {
			acc = path.Join(acc, el)
			if err := tw.WriteHeader(&tar.Header{Name: acc + "/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: uid, Gid: gid}); err != nil {
				return err
			}
		}
	}
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	srcAbs, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symlink; copy what it points to instead", ErrUnsafe, src)
	}
	var root *os.Root // links inside a folder are resolved in it, as the session will
	if st.IsDir() {
		if root, err = os.OpenRoot(srcAbs); err != nil {
			return err
		}
		defer root.Close()
	}
	err = filepath.WalkDir(srcAbs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(srcAbs, p)
		if err != nil {
			return err
		}
		name := prefix
		if rel != "." {
			name = prefix + "/" + filepath.ToSlash(rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), ModTime: info.ModTime(), Uid: uid, Gid: gid}
		switch {
		case info.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			return tw.WriteHeader(h)
		case info.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.CopyN(tw, f, info.Size())
			return err
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if root == nil || rel == "." || checkLink(root, filepath.ToSlash(rel), filepath.ToSlash(target)) != nil {
				return fmt.Errorf("%w: symlink %s -> %s points outside %s", ErrUnsafe, p, target, src)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(h)
		}
		return fmt.Errorf("%w: %s is not a file, folder or symlink", ErrUnsafe, p)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
