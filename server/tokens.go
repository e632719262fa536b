package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Token is one line of the token file.
type Token struct {
	Name  string
	Admin bool
	// Policy is what the token may ask (see Policy); an admin's is empty: unlimited.
	Policy Policy
	hash   [32]byte
}

// Tokens is the set of tokens the server accepts, read from a file and read again by Reload
// (on SIGHUP).
type Tokens struct {
	path string
	mu   sync.RWMutex
	set  []Token
}

// LoadTokens reads the token file at path. The file is refused when its group or others may
// read or write it. Each line is `TOKEN NAME [admin] [role=ROLE] [LIMIT=VALUE...]`, or `role
// ROLE LIMIT=VALUE...` which names a set of limits (`role default` applies to every token
// that is not an admin); `#` starts a comment; blank lines are passed over. Tokens are at least
// 16 characters. See Policy for the limits.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again; on an error the tokens in force stay as they were.
func (t *Tokens) Reload() error {
	set, err := readTokens(t.path)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.set = set
	t.mu.Unlock()
	return nil
}

// Len returns the number of tokens in force.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.set)
}

// Lookup returns the token's entry. The comparison takes the same time whichever token
// matches, or none.
func (t *Tokens) Lookup(secret string) (Token, bool) {
	h := sha256.Sum256([]byte(secret))
	t.mu.RLock()
	defer t.mu.RUnlock()
	var found Token
	ok := 0
	for _, tok := range t.set {
		if subtle.ConstantTimeCompare(h[:], tok.hash[:]) == 1 {
			found, ok = tok, 1
		}
	}
	return found, ok == 1
}

func readTokens(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("token file %s: mode %04o lets others read it; run `chmod 600 %s`", path, st.Mode().Perm(), path)
	}
	type tokenLine struct {
		no     int
		fields []string
	}
	var lines []tokenLine
	roles := map[string][]string{}
	roleLine := map[string]int{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "role" {
			if len(fields) < 2 || strings.Contains(fields[1], "=") {
				return nil, fmt.Errorf("token file %s line %d: want `role NAME LIMIT=VALUE...`", path, n)
			}
			if _, dup := roles[fields[1]]; dup {
				return nil, fmt.Errorf("token file %s line %d: role %q is given twice (first on line %d)", path, n, fields[1], roleLine[fields[1]])
			}
			roles[fields[1]], roleLine[fields[1]] = fields[2:], n
			continue
		}
		lines = append(lines, tokenLine{n, fields})
	}
	apply := func(p *Policy, kvs []string, from string, no int) error {
		for _, kv := range kvs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("token file %s line %d: %q: want LIMIT=VALUE (limits: %s)", path, no, kv, strings.Join(policyKeys, ", "))
			}
			if err := p.set(k, v, from); err != nil {
				return fmt.Errorf("token file %s line %d: %w", path, no, err)
			}
		}
		return nil
	}
	base := DefaultPolicy()
	if kvs, ok := roles["default"]; ok {
		if err := apply(&base, kvs, "role default", roleLine["default"]); err != nil {
			return nil, err
		}
	}
	var set []Token
	names := map[string]bool{}
	for _, tl := range lines {
		fields, n := tl.fields, tl.no
		if len(fields) < 2 || strings.Contains(fields[1], "=") {
			return nil, fmt.Errorf("token file %s line %d: want `TOKEN NAME [admin] [role=ROLE] [LIMIT=VALUE...]`", path, n)
		}
		if len(fields[0]) < 16 {
			return nil, fmt.Errorf("token file %s line %d: the token is shorter than 16 characters; make one with `openssl rand -hex 24`", path, n)
		}
		if names[fields[1]] {
			return nil, fmt.Errorf("token file %s line %d: the name %q is given twice; each token has its own name", path, n, fields[1])
		}
		names[fields[1]] = true
		tok := Token{Name: fields[1], hash: sha256.Sum256([]byte(fields[0]))}
		rest := fields[2:]
		if len(rest) > 0 && rest[0] == "admin" {
			tok.Admin, rest = true, rest[1:]
			if len(rest) > 0 {
				return nil, fmt.Errorf("token file %s line %d: an admin token has no limits (it is unlimited); remove %q", path, n, strings.Join(rest, " "))
			}
		}
		if !tok.Admin {
			tok.Policy = base.clone()
			var own []string
			for _, kv := range rest {
				if r, ok := strings.CutPrefix(kv, "role="); ok {
					kvs, found := roles[r]
					if !found {
						return nil, fmt.Errorf("token file %s line %d: no role %q; define it with a line `role %s LIMIT=VALUE...`", path, n, r, r)
					}
					if err := apply(&tok.Policy, kvs, "role "+r, roleLine[r]); err != nil {
						return nil, err
					}
					continue
				}
				if !strings.Contains(kv, "=") {
					return nil, fmt.Errorf("token file %s line %d: %q: want `TOKEN NAME [admin] [role=ROLE] [LIMIT=VALUE...]`", path, n, kv)
				}
				own = append(own, kv)
			}
			if err := apply(&tok.Policy, own, "token "+tok.Name, n); err != nil {
				return nil, err
			}
		}
		set = append(set, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("token file %s has no token; add a line `TOKEN NAME [admin]`", path)
	}
	return set, nil
}
