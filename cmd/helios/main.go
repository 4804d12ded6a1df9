// Command helios is a reverse proxy and load balancer.
package main

import (
	"os"

	"github.com/helios-lb/helios/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
