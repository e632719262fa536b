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
)

// ErrUnsafe is returned for an entry that would escape the destination.
var ErrUnsafe = errors.New("unsafe tar entry")

// Filter decides whether an entry (by its cleaned, slash-separated name) is extracted.
type Filter func(name string, h *tar.Header) bool

// Extract reads tar entries from r and writes them under dst, which must exist. rename, when
// not empty, replaces the first path element of every entry (docker cp's "copy as a new
// name"). It returns the number of regular files written.
func Extract(r io.Reader, dst, rename string, keep Filter) (int, error) {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return 0, fmt.Errorf("open destination %s: %w", dst, err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	files := 0
	var links []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, recheckLinks(root, links)
		}
		if err != nil {
			return files, fmt.Errorf("read tar: %w", err)
		}
		name, err := CleanName(h.Name)
		if err != nil {
			return files, err
		}
		if rename != "" {
			first, rest, _ := strings.Cut(name, "/")
			_ = first
			if rest == "" {
				name = rename
			} else {
				name = rename + "/" + rest
			}
		}
		if keep != nil && !keep(name, h) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(filepath.FromSlash(name), 0o755); err != nil {
				return files, fmt.Errorf("create %s: %w", name, err)
			}
		case tar.TypeReg, tar.TypeRegA:
			if dir := path.Dir(name); dir != "." {
				if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
					return files, fmt.Errorf("create %s: %w", dir, err)
				}
			}
			mode := os.FileMode(h.Mode).Perm() &^ 0o022
			f, err := root.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode|0o600)
			if err != nil {
				return files, fmt.Errorf("write %s: %w", name, err)
			}
			_, err = io.Copy(f, tr)
			cerr := f.Close()
			if err != nil || cerr != nil {
				return files, fmt.Errorf("write %s: %w", name, errors.Join(err, cerr))
			}
			files++
		case tar.TypeSymlink:
			if err := checkLink(root, name, h.Linkname); err != nil {
				return files, err
			}
			if dir := path.Dir(name); dir != "." {
				if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
					return files, fmt.Errorf("create %s: %w", dir, err)
				}
			}
			if err := root.Symlink(h.Linkname, filepath.FromSlash(name)); err != nil {
				return files, fmt.Errorf("link %s: %w", name, err)
			}
			links = append(links, name)
		case tar.TypeLink:
			target, err := CleanName(h.Linkname)
			if err != nil {
				return files, fmt.Errorf("%w: hard link %s -> %s leaves the destination", ErrUnsafe, name, h.Linkname)
			}
			if rename != "" {
				if _, rest, ok := strings.Cut(target, "/"); ok {
					target = rename + "/" + rest
				} else {
					target = rename
				}
			}
			if err := root.Link(filepath.FromSlash(target), filepath.FromSlash(name)); err != nil {
				return files, fmt.Errorf("link %s: %w", name, err)
			}
		default:
			return files, fmt.Errorf("%w: %s is a %s, not a file, folder or link", ErrUnsafe, name, typeName(h.Typeflag))
		}
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
