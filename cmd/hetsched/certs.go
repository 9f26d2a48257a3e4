package main

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/certs"
)

func newCerts() *cobra.Command {
	var dir string
	var force bool
	var validity time.Duration
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a cluster CA and the certificates of the server, agents and clients",
		Long: `Make the TLS material of a cluster in one directory (--dir):

  hetsched certs init                          the CA: ca.pem, ca-key.pem (keep it secret)
  hetsched certs server --dns HOST --ip ADDR   server.pem for hetsched server --tls-cert/--tls-key
  hetsched certs agent --nodes gpu-1,gpu-2     agent-NAME.pem: an agent that may serve only those nodes
  hetsched certs client --role admin           client-admin.pem (or --role tenant --tenant T, --role metrics)
  hetsched certs member --name s1 --ip ADDR    member-s1.pem: an --ha server's etcd member (--peer-cert/--peer-key)

Then: hetsched server --tls-cert server.pem --tls-key server-key.pem --client-ca ca.pem,
hetsched agent --server https://HOST:7070 --ca ca.pem --cert agent-NAME.pem --key agent-NAME-key.pem,
and the CLI with --ca/--cert/--key (or $HETSCHED_CA, $HETSCHED_CERT, $HETSCHED_KEY).
Keys are ECDSA P-256, written 0600; existing files are kept unless --force.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "hetsched-certs", "directory of the CA and the certificates")
	cmd.PersistentFlags().BoolVar(&force, "force", false, "replace existing files")

	var cn string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Make the cluster's CA (ca.pem, ca-key.pem)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := certs.Init(dir, certs.CAOptions{CommonName: cn, Validity: validity, Force: force}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s/%s and %s/%s (keep the key secret; it signs every certificate)\n", dir, certs.CAFile, dir, certs.CAKeyFile)
			return nil
		},
	}
	initCmd.Flags().StringVar(&cn, "cn", "", "the CA's common name (default \"hetsched CA\" and random hex)")
	initCmd.Flags().DurationVar(&validity, "validity", certs.DefaultCAValidity, "how long the CA is valid")

	leaf := func(kind, use, short string, set func(*certs.IssueOptions), flags func(*cobra.Command)) *cobra.Command {
		var name string
		var validity time.Duration
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				opt := certs.IssueOptions{Kind: kind, Name: name, Validity: validity, Force: force}
				set(&opt)
				cert, key, err := certs.Issue(dir, opt)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s\n", cert, key)
				return nil
			},
		}
		c.Flags().StringVar(&name, "name", "", "common name and file name")
		c.Flags().DurationVar(&validity, "validity", certs.DefaultLeafValidity, "how long the certificate is valid")
		flags(c)
		return c
	}

	// hosts is a leaf whose SANs are host names and addresses (--dns,
	// --ip) that who reach it by.
	hosts := func(kind, use, short, who string) *cobra.Command {
		var dns []string
		var ips []net.IP
		return leaf(kind, use, short,
			func(o *certs.IssueOptions) { o.DNSNames, o.IPs = dns, ips },
			func(c *cobra.Command) {
				c.Flags().StringSliceVar(&dns, "dns", nil, "host names "+who+" by (default localhost, with 127.0.0.1 and ::1)")
				c.Flags().IPSliceVar(&ips, "ip", nil, "addresses "+who+" by")
			})
	}
	server := hosts(certs.KindServer, "server", "Make the server's certificate (server.pem): its host names and addresses", "clients reach the server")

	var nodes []string
	agentCmd := leaf(certs.KindAgent, "agent --nodes NODE[,PATTERN...]", "Make an agent's certificate: the nodes it may serve (names, or patterns like gpu-*)",
		func(o *certs.IssueOptions) { o.Nodes = nodes },
		func(c *cobra.Command) {
			c.Flags().StringSliceVar(&nodes, "nodes", nil, "node names or path.Match patterns the agent may register (* for any)")
		})

	var role, tenant string
	client := leaf(certs.KindClient, "client --role admin|tenant|metrics [--tenant T]", "Make a CLI or API client's certificate: an admin, a tenant, or a metrics scraper",
		func(o *certs.IssueOptions) { o.Role, o.Tenant = role, tenant },
		func(c *cobra.Command) {
			c.Flags().StringVar(&role, "role", "", "admin, tenant or metrics (/metrics only)")
			c.Flags().StringVar(&tenant, "tenant", "", "the tenant, with --role tenant")
		})

	member := hosts(certs.KindMember, "member --name S1 --dns HOST --ip ADDR",
		"Make an HA server's etcd member certificate (member-NAME.pem): its name in --peers, its peer URL's host names and addresses",
		"the other members reach this one")

	cmd.AddCommand(initCmd, server, agentCmd, client, member)
	return cmd
}
