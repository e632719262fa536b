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
	hash  [32]byte
}

// Tokens is the set of tokens the server accepts, read from a file and read again by Reload
// (on SIGHUP).
type Tokens struct {
	path string
	mu   sync.RWMutex
	set  []Token
}

// LoadTokens reads the token file at path. The file is refused when its group or others may
// read or write it. Each line is `TOKEN NAME [admin]`; `#` starts a comment; blank lines are
// passed over. Tokens are at least 16 characters.
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
	var set []Token
	names := map[string]bool{}
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
		if len(fields) < 2 || len(fields) > 3 || (len(fields) == 3 && fields[2] != "admin") {
			return nil, fmt.Errorf("token file %s line %d: want `TOKEN NAME [admin]`", path, n)
		}
		if len(fields[0]) < 16 {
			return nil, fmt.Errorf("token file %s line %d: the token is shorter than 16 characters; make one with `openssl rand -hex 24`", path, n)
		}
		if names[fields[1]] {
			return nil, fmt.Errorf("token file %s line %d: the name %q is given twice; each token has its own name", path, n, fields[1])
		}
		names[fields[1]] = true
		set = append(set, Token{Name: fields[1], Admin: len(fields) == 3, hash: sha256.Sum256([]byte(fields[0]))})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("token file %s has no token; add a line `TOKEN NAME [admin]`", path)
	}
	return set, nil
}
