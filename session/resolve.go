package session

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// maxLinks bounds the links followed while resolving one path (the kernel's own bound).
const maxLinks = 40

// ResolveRead turns a session-side path that is to be read out of the session into one that
// leads where the session's own code would arrive, resolved inside the workspace only: every
// element but the last that is a link is followed here, as the session sees it, and the path
// it leads to must be under /workspace too. The engine's copy follows the links of a path as
// root, before anything checks them, so a link planted in the workspace
// (`st -> /var/lib/runtimectl`) would otherwise read the runtime's root-only state. The last
// element is left as it is: a link there is copied as a link, which the host side confines.
func (c *Client) ResolveRead(ctx context.Context, name, p string) (string, error) {
	abs, err := ResolvePath(p)
	if err != nil {
		return "", err
	}
	done := Workspace // resolved, with no link in it
	rest := strings.Split(strings.TrimPrefix(strings.TrimPrefix(abs, Workspace), "/"), "/")
	links := 0
	for len(rest) > 0 {
		elem := rest[0]
		rest = rest[1:]
		if elem == "" || elem == "." {
			continue
		}
		if elem == ".." {
			done = path.Dir(done)
			if err := inWorkspace(p, done); err != nil {
				return "", err
			}
			continue
		}
		next := path.Join(done, elem)
		if len(rest) == 0 {
			done = next
			break
		}
		info, err := c.ctr.Stat(ctx, name, next)
		if err != nil {
			return "", err
		}
		if info.Link == "" {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%w path %q: more than %d links on the way", ErrInvalid, p, maxLinks)
		}
		target := info.Link
		if !path.IsAbs(target) {
			target = path.Join(done, target)
		}
		target = path.Clean(target)
		if err := inWorkspace(p, target); err != nil {
			return "", err
		}
		// Walk the target again from the workspace: its own elements may be links too.
		rest = append(strings.Split(strings.TrimPrefix(strings.TrimPrefix(target, Workspace), "/"), "/"), rest...)
		done = Workspace
	}
	if _, err := ResolvePath(done); err != nil {
		return "", err
	}
	return done, nil
}

func inWorkspace(p, resolved string) error {
	if resolved != Workspace && !strings.HasPrefix(resolved, Workspace+"/") {
		return fmt.Errorf("%w path %q: it leads out of %s through a link (to %s); reads out of a session stay inside its workspace", ErrInvalid, p, Workspace, resolved)
	}
	return nil
}

// SessionOwns reports whether an entry of an archive read out of session name with owner uid
// is the session's own. A read refuses an entry the session user does not own (a link
// swapped in after ResolveRead would lead to root-owned state), where the engine's archive
// says who owns what: Docker's and the Kubernetes backend's do; Podman's gives every entry to
// the user that asks (its copier chowns what it sends), so there the check cannot be made and
// a read out relies on ResolveRead alone.
func (c *Client) SessionOwns(ctx context.Context, uid int) bool {
	if uid == SessionUID {
		return true
	}
	return !c.archiveKeepsOwners(ctx)
}

// archiveKeepsOwners asks the engine once whether its archives keep their owners (every
// engine but Podman's); an engine that cannot say is taken to keep them.
func (c *Client) archiveKeepsOwners(ctx context.Context) bool {
	c.ownersOnce.Do(func() {
		c.keepsOwners = true
		if e, err := c.ctr.About(ctx); err == nil && e.Name == "Podman" {
			c.keepsOwners = false
		}
	})
	return c.keepsOwners
}
