// Package auth checks requests' credentials: HTTP Basic against an
// htpasswd file of bcrypt hashes.
//
// bcrypt is slow on purpose (tens of milliseconds at cost 10), too slow
// for an event loop: Users.Check answers at once from a cache of
// credentials verified before, and only a miss needs Users.Verify, which
// the pipeline runs off the loop.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Users is an htpasswd file's users: names and bcrypt hashes. It is
// immutable once loaded, but for its cache of verified credentials, and
// safe for concurrent use.
type Users struct {
	hashes map[string][]byte
	cache  verified
}

// LoadUsers reads an htpasswd file (name:hash lines, as `htpasswd -B`
// writes them; blank lines and # comments skipped). Hashes other than
// bcrypt ($2a$, $2b$, $2y$) are refused with their line: MD5 (apr1), SHA1
// and crypt hashes are too weak to accept.
func LoadUsers(path string) (*Users, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &Users{hashes: make(map[string][]byte)}
	u.cache.init(maxCached)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		name, hash, ok := strings.Cut(text, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("%s:%d: want name:hash", path, line)
		}
		if !strings.HasPrefix(hash, "$2a$") && !strings.HasPrefix(hash, "$2b$") && !strings.HasPrefix(hash, "$2y$") {
			return nil, fmt.Errorf("%s:%d: user %q: the hash is not bcrypt (make one with `htpasswd -B`)", path, line, name)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("%s:%d: user %q: %v", path, line, name, err)
		}
		if _, dup := u.hashes[name]; dup {
			return nil, fmt.Errorf("%s:%d: user %q listed twice", path, line, name)
		}
		u.hashes[name] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(u.hashes) == 0 {
		return nil, fmt.Errorf("%s: no users", path)
	}
	return u, nil
}

// Len returns the number of users.
func (u *Users) Len() int { return len(u.hashes) }

// Result is what Check found.
type Result uint8

// The results of Check.
const (
	// Denied: no credentials, malformed ones, an unknown user, or a
	// password known to be wrong.
	Denied Result = iota
	// Allowed: the credentials were verified before.
	Allowed
	// Unknown: the user exists, and the password has not been verified
	// yet: Verify decides (off the loop).
	Unknown
)

// Check answers from what is known, without bcrypt: the Authorization
// value (nil: none) of a request. It allocates nothing.
func (u *Users) Check(authorization []byte) Result {
	var buf [maxDecoded]byte
	user, pass, ok := parseBasic(authorization, &buf)
	if !ok {
		return Denied
	}
	if _, known := u.hashes[string(user)]; !known {
		return Denied
	}
	switch u.cache.get(sum(user, pass)) {
	case 1:
		return Allowed
	case 2:
		return Denied
	}
	return Unknown
}

// Verify runs bcrypt on the credentials in an Authorization value and
// remembers the result for Check. It blocks for bcrypt's cost: call it off
// the event loop.
func (u *Users) Verify(authorization []byte) bool {
	var buf [maxDecoded]byte
	user, pass, ok := parseBasic(authorization, &buf)
	if !ok {
		return false
	}
	hash, known := u.hashes[string(user)]
	if !known {
		return false
	}
	good := bcrypt.CompareHashAndPassword(hash, pass) == nil
	var v byte = 2
	if good {
		v = 1
	}
	u.cache.put(sum(user, pass), v)
	return good
}

// User returns the user name in an Authorization value ("" when there
// is none), for the access log.
func User(authorization []byte) string {
	var buf [maxDecoded]byte
	user, _, ok := parseBasic(authorization, &buf)
	if !ok {
		return ""
	}
	return string(user)
}

// maxDecoded bounds decoded credentials.
const maxDecoded = 768

// parseBasic reads "Basic base64(user:pass)" into buf (the caller's, on
// its stack); ok false when it is not that.
func parseBasic(v []byte, buf *[maxDecoded]byte) (user, pass []byte, ok bool) {
	const prefix = "basic "
	if len(v) <= len(prefix) || !bytes.EqualFold(v[:len(prefix)], []byte(prefix)) {
		return nil, nil, false
	}
	enc := bytes.TrimSpace(v[len(prefix):])
	if base64.StdEncoding.DecodedLen(len(enc)) > len(buf) {
		return nil, nil, false
	}
	dec := buf[:]
	n, err := base64.StdEncoding.Decode(dec, enc)
	if err != nil {
		return nil, nil, false
	}
	user, pass, ok = bytes.Cut(dec[:n], []byte(":"))
	return user, pass, ok && len(user) > 0
}

// sum is the cache's key for a user and password: a hash, so that the
// cache keeps no password.
func sum(user, pass []byte) [32]byte {
	var b [maxDecoded + 1]byte
	n := copy(b[:], user)
	b[n] = 0
	n++
	n += copy(b[n:], pass)
	return sha256.Sum256(b[:n])
}

// maxCached bounds the credentials remembered (right and wrong ones).
const maxCached = 4096

// verified remembers verification results by credential hash: 1 right,
// 2 wrong. When full, it starts over (a burst of new credentials costs
// the cache, never memory).
type verified struct {
	mu  sync.RWMutex
	m   map[[32]byte]byte
	max int
}

func (c *verified) init(max int) { c.m, c.max = make(map[[32]byte]byte), max }

func (c *verified) get(k [32]byte) byte {
	c.mu.RLock()
	v := c.m[k]
	c.mu.RUnlock()
	return v
}

func (c *verified) put(k [32]byte, v byte) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
	c.mu.Unlock()
}
