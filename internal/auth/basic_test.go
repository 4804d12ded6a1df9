package auth

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func writeUsers(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func basic(user, pass string) []byte {
	return []byte("Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
}

func TestCheckVerify(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	u, err := LoadUsers(writeUsers(t, "# admins", "", "alice:"+string(h)))
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Check(nil); got != Denied {
		t.Errorf("no credentials: got %v, want Denied", got)
	}
	if got := u.Check(basic("bob", "s3cret")); got != Denied {
		t.Errorf("unknown user: got %v, want Denied", got)
	}
	if got := u.Check([]byte("Bearer abc")); got != Denied {
		t.Errorf("other scheme: got %v, want Denied", got)
	}
	if got := u.Check(basic("alice", "s3cret")); got != Unknown {
		t.Errorf("first time: got %v, want Unknown", got)
	}
	if !u.Verify(basic("alice", "s3cret")) {
		t.Errorf("Verify right password: got false")
	}
	if got := u.Check(basic("alice", "s3cret")); got != Allowed {
		t.Errorf("after Verify: got %v, want Allowed", got)
	}
	if u.Verify(basic("alice", "wrong")) {
		t.Errorf("Verify wrong password: got true")
	}
	if got := u.Check(basic("alice", "wrong")); got != Denied {
		t.Errorf("known wrong: got %v, want Denied", got)
	}
	if got := User(basic("alice", "x")); got != "alice" {
		t.Errorf("User: got %q, want alice", got)
	}
	if n := testing.AllocsPerRun(100, func() { u.Check(basic("alice", "s3cret")) }); n > 1 { // basic() itself allocates
		t.Errorf("Check: got %v allocations, want none of its own", n)
	}
}

func TestCheckAllocatesNothing(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	u, _ := LoadUsers(writeUsers(t, "a:"+string(h)))
	cred := basic("a", "pw")
	u.Verify(cred)
	if n := testing.AllocsPerRun(100, func() { u.Check(cred) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

func TestLoadUsersErrors(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	for _, c := range []struct {
		name, content, want string
	}{
		{"md5", "a:$apr1$xyz$abc", "users:1: user \"a\": the hash is not bcrypt"},
		{"no colon", "justaname", "users:1: want name:hash"},
		{"duplicate", "a:" + string(h) + "\na:" + string(h), "users:2: user \"a\" listed twice"},
		{"empty", "# nobody", "no users"},
		{"broken bcrypt", "a:$2y$99$abc", "users:1: user \"a\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadUsers(writeUsers(t, c.content))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
