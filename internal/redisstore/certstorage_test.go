package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/helios-lb/helios/internal/redisstore/redistest"
)

// TestCertStorageAsFiles: the same operations on a CertStorage and on
// certmagic's FileStorage give the same answers (values, lists, stats,
// existence, what is missing), so certmagic finds in Redis what it would
// find in a directory.
func TestCertStorageAsFiles(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := Open(Options{Addr: srv.Addr})
	defer s.Close()
	stores := []certmagic.Storage{&certmagic.FileStorage{Path: t.TempDir()}, s.CertStorage(nil)}
	ctx := context.Background()
	keys := []string{
		"acme/ca/users/ops@example.com/ops.json",
		"acme/ca/users/ops@example.com/ops.key",
		"certificates/ca/a.example/a.example.crt",
		"certificates/ca/a.example/a.example.key",
		"certificates/ca/a.example/a.example.json",
		"certificates/ca/b.example/b.example.crt",
		"certificates/ca/ab.example/ab.example.crt", // "a" sorts before "ab": ranges must not mix them
		"last_clean.json",
	}
	for _, st := range stores {
		for i, k := range keys {
			if err := st.Store(ctx, k, []byte(fmt.Sprint("value ", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Delete(ctx, "certificates/ca/b.example"); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, "nothing/here"); err != nil {
			t.Fatal(err)
		}
	}
	// describe answers every question about the storage in one string.
	describe := func(st certmagic.Storage) string {
		out := ""
		for _, k := range append(keys, "certificates/ca/a.example", "certificates", "certificates/ca/b.example/b.example.crt", "none") {
			out += fmt.Sprintf("exists %s: %v\n", k, st.Exists(ctx, k))
			info, err := st.Stat(ctx, k)
			out += fmt.Sprintf("stat %s: terminal=%v notexist=%v\n", k, info.IsTerminal, errors.Is(err, fs.ErrNotExist))
			if info.IsTerminal || err != nil { // a directory's size and value are the file system's own
				v, err := st.Load(ctx, k)
				out += fmt.Sprintf("load %s: %q size %d notexist=%v\n", k, v, info.Size, errors.Is(err, fs.ErrNotExist))
			}
		}
		for _, p := range []string{"certificates", "certificates/ca", "acme", "certificates/ca/a.example", "none"} {
			for _, rec := range []bool{false, true} {
				l, err := st.List(ctx, p, rec)
				slices.Sort(l)
				out += fmt.Sprintf("list %s recursive=%v: %v notexist=%v\n", p, rec, l, errors.Is(err, fs.ErrNotExist))
			}
		}
		return out
	}
	files, redis := describe(stores[0]), describe(stores[1])
	if files != redis {
		t.Errorf("FileStorage and CertStorage differ:\nfiles:\n%s\nredis:\n%s", files, redis)
	}
}

// TestCertStorageLocks: a lock held by one instance makes another wait
// until it is unlocked; a holder that stops refreshing (died, or closed)
// frees it after its time to live; only the holder can unlock.
func TestCertStorageLocks(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	open := func() *CertStorage {
		s := Open(Options{Addr: srv.Addr})
		t.Cleanup(func() { s.Close() })
		c := s.CertStorage(nil)
		c.ttl = 600 * time.Millisecond
		return c
	}
	a, b := open(), open()
	ctx := context.Background()
	if err := a.Lock(ctx, "issue_cert_a.example"); err != nil {
		t.Fatal(err)
	}
	// Held past its time to live: a refreshes it.
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	err := b.Lock(tctx, "issue_cert_a.example")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b's Lock while a holds it: got %v, want the deadline", err)
	}
	if err := b.Unlock(ctx, "issue_cert_a.example"); err == nil {
		t.Errorf("b's Unlock of a's lock: got nil, want an error")
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx, "issue_cert_a.example") }()
	time.Sleep(100 * time.Millisecond)
	if err := a.Unlock(ctx, "issue_cert_a.example"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("b did not get the lock within 2s of a's Unlock")
	}
	// b closes without unlocking (as a process that died): the lock
	// frees itself.
	b.Close()
	start := time.Now()
	if err := a.Lock(ctx, "issue_cert_a.example"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a waited %v for a dead holder's lock, want about its time to live (600ms)", d)
	}
	a.Unlock(ctx, "issue_cert_a.example")
}
