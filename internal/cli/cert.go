package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/certgen"
)

func newCertCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make certificates for trying Helios out",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSelfSignedCmd())
	return cmd
}

func newSelfSignedCmd() *cobra.Command {
	var (
		out, hosts, name string
		days             int
		rsa              bool
	)
	cmd := &cobra.Command{
		Use:   "selfsigned",
		Short: "Write a self-signed certificate and its key (for demos and tests, not for production)",
		Long: `Selfsigned writes a certificate signed by its own key, for the given host
names and IP addresses, to DIR/NAME.pem and its private key to DIR/NAME.key
(mode 0600). Clients trust it by trusting the certificate itself:

  curl --cacert DIR/NAME.pem https://localhost:8443/

Use it in a listener's tls block as cert_file and key_file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if days < 1 {
				return fmt.Errorf("--days %d: at least 1", days)
			}
			var hostList []string
			for h := range strings.SplitSeq(hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hostList = append(hostList, h)
				}
			}
			if len(hostList) == 0 {
				return fmt.Errorf("--host: at least one host name or IP address")
			}
			key := certgen.ECDSAP256
			if rsa {
				key = certgen.RSA2048
			}
			now := time.Now()
			c, err := certgen.SelfSigned(certgen.Request{
				Hosts: hostList, Key: key, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Duration(days) * 24 * time.Hour),
			})
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			certFile, keyFile, err := c.WriteFiles(out, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s (%s, for %s, valid until %s)\n",
				certFile, keyFile, key, strings.Join(hostList, ", "), c.Leaf.NotAfter.UTC().Format("2006-01-02"))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", ".", "directory to write the files to (created if missing)")
	cmd.Flags().StringVar(&hosts, "host", "localhost,127.0.0.1", "comma-separated host names and IP addresses the certificate is for")
	cmd.Flags().StringVar(&name, "name", "helios", "base name of the files: NAME.pem and NAME.key")
	cmd.Flags().IntVar(&days, "days", 90, "days the certificate is valid")
	cmd.Flags().BoolVar(&rsa, "rsa", false, "an RSA-2048 key instead of ECDSA P-256")
	return cmd
}
