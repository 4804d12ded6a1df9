package config

import "golang.org/x/sys/unix"

// writable returns nil when this process may write path (a file to
// append to, or a directory to create one in), and what the system said
// otherwise. access(2) answers for the real user, who is the one that
// runs helios serve as well as helios validate.
func writable(path string) error {
	return unix.Access(path, unix.W_OK)
}
