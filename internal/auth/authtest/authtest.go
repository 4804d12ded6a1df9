// Package authtest writes htpasswd files for tests.
package authtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// File writes an htpasswd file for the users given as "name:password",
// their passwords hashed with bcrypt at its lowest cost (fast), in a
// directory of the test's, and returns its path.
func File(t testing.TB, users ...string) string {
	t.Helper()
	var b strings.Builder
	for _, u := range users {
		name, pass, _ := strings.Cut(u, ":")
		h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(name + ":" + string(h) + "\n")
	}
	f := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
