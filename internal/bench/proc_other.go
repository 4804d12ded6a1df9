//go:build !linux

package bench

import "syscall"

// childAttr puts a child in its own process group (the benchmark runs on
// Linux; elsewhere it only has to build).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
