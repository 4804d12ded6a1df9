package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/acme"
	"github.com/helios-lb/helios/internal/certgen"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/tlsconf"
)

func newCertCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "List the certificates Helios serves, or make one for trying Helios out",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSelfSignedCmd(), newCertListCmd())
	return cmd
}

func newCertListCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the certificates of the config's TLS listeners: files and ACME storage",
		Long: `List prints one line per certificate the config's TLS listeners serve or
have in ACME storage: the listener, the names, the expiry (and how long
is left), and the source: the certificate file, or the ACME CA it came
from and its file in storage. A name listed under acme without a
certificate yet says so. It reads files only; Helios need not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := commandConfig(cmd, file, nil, cmd.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			rows, err := certRows(cfg, time.Now())
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "helios:", err)
				return exitError{1}
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "LISTENER\tNAMES\tEXPIRES\tSOURCE")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.listener, r.names, r.expires, r.source)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default ./helios.yaml, then /etc/helios/helios.yaml)")
	return cmd
}

// certRow is one line of `helios cert list`.
type certRow struct{ listener, names, expires, source string }

// certRows lists the certificates of cfg's TLS listeners: their files,
// then what their ACME storage holds for the names they manage (and,
// with on_demand, every other name stored there).
func certRows(cfg *config.Config, now time.Time) ([]certRow, error) {
	var rows []certRow
	when := func(t time.Time) string {
		left := t.Sub(now)
		if left <= 0 {
			return t.UTC().Format("2006-01-02 15:04") + " (expired)"
		}
		return fmt.Sprintf("%s (%dd left)", t.UTC().Format("2006-01-02 15:04"), int(left.Hours()/24))
	}
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		if l.TLS == nil {
			continue
		}
		for _, p := range l.TLS.Pairs() {
			c, err := tlsconf.LoadKeyPair(p.CertFile, p.KeyFile)
			if err != nil {
				rows = append(rows, certRow{l.Name, "?", "?", "file " + p.CertFile + ": " + err.Error()})
				continue
			}
			rows = append(rows, certRow{l.Name, strings.Join(c.Leaf.DNSNames, ","), when(c.Leaf.NotAfter), "file " + p.CertFile})
		}
		a := l.TLS.ACME
		if a == nil {
			continue
		}
		stored, where, err := storedCerts(a)
		if err != nil {
			return nil, fmt.Errorf("listener %s: reading %s: %w", l.Name, where(""), err)
		}
		names, _ := cfg.ACMENames(l)
		for _, n := range names {
			found := false
			for _, s := range stored {
				if slices.Contains(s.Names, n) {
					found = true
					rows = append(rows, certRow{l.Name, strings.Join(s.Names, ","), when(s.NotAfter), "acme " + s.Issuer + " " + where(s.Key)})
				}
			}
			if !found {
				rows = append(rows, certRow{l.Name, n, "-", "acme: none yet (" + a.CA + ")"})
			}
		}
		if a.OnDemand != nil {
			for _, s := range stored {
				if !slices.ContainsFunc(s.Names, func(n string) bool { return slices.Contains(names, n) }) {
					rows = append(rows, certRow{l.Name, strings.Join(s.Names, ","), when(s.NotAfter), "acme on demand " + s.Issuer + " " + where(s.Key)})
				}
			}
		}
	}
	return rows, nil
}

// storedCerts lists the certificates in an acme block's storage (a
// directory, or Redis), and says where a key of it is.
func storedCerts(a *config.ACME) (_ []acme.StoredCert, where func(key string) string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !config.IsStoreURL(a.Storage) {
		where = func(key string) string { return filepath.Join(a.Storage, filepath.FromSlash(key)) }
		stored, err := acme.Stored(ctx, &certmagic.FileStorage{Path: a.Storage})
		return stored, where, err
	}
	u, err := config.ParseStoreURL(a.Storage)
	where = func(key string) string { return strings.TrimSpace(u.Redacted() + " " + key) }
	if err != nil {
		return nil, where, err
	}
	st := redisstore.Open(redisstore.URLOptions(u, a.StoragePassword))
	defer st.Close()
	stored, err := acme.Stored(ctx, st.CertStorage(nil))
	return stored, where, err
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
