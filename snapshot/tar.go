package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// ManifestsFromTar reads manifests from a tar stream of the snapshots
// directory, as the engine's copy out of a session gives it for
// /var/lib/runtimectl/snapshots (entries "snapshots/<id>.json"), and
// returns them oldest first. Entries that are not manifests (directories,
// links, temporary files, other names) are skipped; a manifest that does
// not parse, is larger than 16 MiB or whose id is not its file name is
// reported as a [Problem] among the errors. A broken tar stream ends the
// reading with an error; what was read before it is returned.
func ManifestsFromTar(r io.Reader) ([]Manifest, []error) {
	tr := tar.NewReader(r)
	var ms []Manifest
	var errs []error
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read snapshot manifests from tar: %w", err))
			break
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Base(hdr.Name)
		id, ok := strings.CutSuffix(name, manifestExt)
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		m, err := manifestFromTar(tr, hdr, id)
		if err != nil {
			errs = append(errs, Problem{ID: id, Err: err})
			continue
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, compareManifests)
	return ms, errs
}

func manifestFromTar(tr *tar.Reader, hdr *tar.Header, id string) (Manifest, error) {
	if hdr.Size > maxManifestBytes {
		return Manifest{}, fmt.Errorf("%w: manifest is larger than %d bytes", ErrCorrupt, maxManifestBytes)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", hdr.Name, err)
	}
	m, err := ParseManifest(b)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if m.ID != id {
		return Manifest{}, fmt.Errorf("%w: manifest %s names id %q", ErrCorrupt, hdr.Name, m.ID)
	}
	return m, nil
}
