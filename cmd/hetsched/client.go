package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/cli"
)

// clientFlags are the flags every API command takes.
type clientFlags struct {
	server, token, output string
	tls                   tlsFlags
	timeout               time.Duration
	timeoutFlag           string // --timeout, or run's --request-timeout
}

// tlsFlags are --ca, --cert and --key ($HETSCHED_CA, $HETSCHED_CERT,
// $HETSCHED_KEY) of the CLI and the agent.
type tlsFlags struct{ ca, cert, key string }

func (t *tlsFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.ca, "ca", os.Getenv("HETSCHED_CA"), "CA certificate (PEM) that signed an https:// server's certificate (default $HETSCHED_CA; else the system's)")
	cmd.Flags().StringVar(&t.cert, "cert", os.Getenv("HETSCHED_CERT"), "client certificate (PEM) to authenticate with instead of a token (default $HETSCHED_CERT)")
	cmd.Flags().StringVar(&t.key, "key", os.Getenv("HETSCHED_KEY"), "private key of --cert (default $HETSCHED_KEY)")
}

// config is the TLS of server (nil for http:// without TLS flags).
func (t *tlsFlags) config(server string) (*tls.Config, error) {
	list := strings.Split(server, ",")
	for _, s := range list[1:] {
		if strings.HasPrefix(strings.TrimSpace(s), "https://") != strings.HasPrefix(strings.TrimSpace(list[0]), "https://") {
			return nil, fmt.Errorf("--server %q mixes http:// and https:// servers", server)
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(server), "https://") {
		if t.ca != "" || t.cert != "" || t.key != "" {
			return nil, fmt.Errorf("--ca, --cert and --key ($HETSCHED_CA, $HETSCHED_CERT, $HETSCHED_KEY) need an https:// --server, got %q", server)
		}
		return nil, nil
	}
	return certs.ClientTLSConfig(t.ca, t.cert, t.key)
}

func (f *clientFlags) add(cmd *cobra.Command) { f.addAs(cmd, "timeout") }

// addAs is add with the request timeout flag named timeoutFlag (run's
// --timeout is its task's).
func (f *clientFlags) addAs(cmd *cobra.Command, timeoutFlag string) {
	f.timeoutFlag = timeoutFlag
	server := os.Getenv("HETSCHED_SERVER")
	if server == "" {
		server = "http://127.0.0.1:7070"
	}
	cmd.Flags().StringVar(&f.server, "server", server, "API address, or several comma-separated (the servers of a replicated control plane: any of them answers, the next is tried when one cannot be reached); $HETSCHED_SERVER, when set, is the default")
	cmd.Flags().StringVar(&f.token, "token", os.Getenv("HETSCHED_TOKEN"), "bearer token (default $HETSCHED_TOKEN)")
	f.tls.add(cmd)
	cmd.Flags().StringVarP(&f.output, "output", "o", cli.Table, cli.OutputHelp)
	cmd.Flags().DurationVar(&f.timeout, timeoutFlag, 30*time.Second, "how long one request may take (with --wait, at least the wait and 10s)")
}

func (f *clientFlags) client() (*cli.Client, error) {
	if err := cli.CheckOutput(f.output); err != nil {
		return nil, err
	}
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--%s: must be positive", f.timeoutFlag)
	}
	tc, err := f.tls.config(f.server)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		return cli.NewTLSClient(f.server, f.token, f.timeout, tc), nil
	}
	return cli.NewClient(f.server, f.token, f.timeout), nil
}

func newClientCommands() []*cobra.Command {
	cmds := []*cobra.Command{newSubmit(), newRun(), newGet(), newDescribe(), newCancel(), newLogs(), newComplete(), newRenew(), newCompletion(), newHistory(), newUsage()}
	for _, action := range []string{"cordon", "uncordon", "drain"} {
		var f clientFlags
		action := action
		nc := &cobra.Command{
			Use:   action + " NODE",
			Short: map[string]string{"cordon": "Stop new placements on a node", "uncordon": "Make a node ready again", "drain": "Stop placements and move a node's tasks"}[action],
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.client()
				if err != nil {
					return err
				}
				return cli.NodeAction(cmd.Context(), c, cmd.OutOrStdout(), action, args[0])
			},
			ValidArgsFunction: completeName(&f, "node"),
		}
		f.add(nc)
		cmds = append(cmds, nc)
	}
	return cmds
}

// dependencyHelp is --dependency's help.
const dependencyHelp = "TYPE:ID,... as Slurm's: afterok (the default for a bare ID: once ID succeeded), afterany (once it ended), afternotok (once it ended without success); ID is a task or a job"

func newSubmit() *cobra.Command {
	var f clientFlags
	var file, deps string
	var wait waitFlag
	submit := &cobra.Command{
		Use:   "submit -f FILE [--wait[=DUR|placed[:DUR]]]",
		Short: "Submit a task, a task list or a job (YAML or JSON; -f - reads standard input); --wait: until it ends, exiting with its code",
		Example: `  hetsched submit -f examples/data-prep.yaml             # returns once it is durable
  hetsched submit -f job.yaml --wait                      # as sbatch --wait: exit 0 only if every task succeeded
  hetsched submit -f task.yaml --wait=1h                  # the same, giving up (exit 1) after an hour
  hetsched submit -f task.yaml --wait=placed:30s          # only until it is placed
  hetsched submit -f eval.yaml --dependency afterok:train # as sbatch --dependency`,
		Args: cobra.ArbitraryArgs, // only --wait's DUR, checked below
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := wait.takeArg(args)
			if err != nil {
				return err
			}
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			dependsOn, err := cli.ParseDependencyFlag(deps)
			if err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			body, err := readSpecFlag(cmd, file)
			if err != nil {
				return err
			}
			if err := cli.NotTasks(body); err != nil {
				return err
			}
			user := ""
			if c.Token == "" {
				user = cli.LocalUser() // with a token, the server knows who it is
			}
			if body, err = cli.Amend(body, dependsOn, user); err != nil {
				return err
			}
			return cli.Submit(cmd.Context(), c, cmd.OutOrStdout(), body, wait.m, f.output)
		},
	}
	f.add(submit)
	submit.Flags().StringVarP(&file, "file", "f", "", "task file")
	submit.Flags().StringVar(&deps, "dependency", "", dependencyHelp+"; a job's are the job's own (none of its tasks starts before)")
	wait.add(submit, "wait for the end and exit with the task's code (a job: 0 only if every task succeeded); =DUR: at most DUR; =placed[:DUR]: only for placement (default 2s)")
	return submit
}

func newDescribe() *cobra.Command {
	var f clientFlags
	kinds := []string{"task", "job", "node", "queue", "service"}
	describe := &cobra.Command{
		Use:   "describe task|job|node|queue|service NAME",
		Short: "Show one task, job, node, queue or service in full: a page to read (-o json|yaml: the server's object)",
		Example: `  hetsched describe task train-1     # its attempts and events too
  hetsched describe node gpu-a       # its devices and who holds them
  hetsched describe queue team-a -o yaml`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return cli.Describe(cmd.Context(), c, cmd.OutOrStdout(), args[0], args[1], f.output)
		},
		ValidArgsFunction: completeKindThenName(&f, kinds, false),
	}
	f.add(describe)
	return describe
}

func newCancel() *cobra.Command {
	var f clientFlags
	cancel := &cobra.Command{
		Use:   "cancel [task|job] ID",
		Short: "Cancel a task or a job (a bare ID is a task's, else a job's)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return cli.CancelAny(cmd.Context(), c, cmd.OutOrStdout(), args[0])
			}
			switch args[0] {
			case "task":
				return cli.Cancel(cmd.Context(), c, cmd.OutOrStdout(), args[1])
			case "job":
				return cli.CancelJob(cmd.Context(), c, cmd.OutOrStdout(), args[1])
			}
			return fmt.Errorf("cancel: the kind must be task or job, got %q", args[0])
		},
		ValidArgsFunction: completeKindThenName(&f, []string{"task", "job"}, true),
	}
	f.add(cancel)
	return cancel
}

func newLogs() *cobra.Command {
	var f clientFlags
	var o cli.LogOptions
	logs := &cobra.Command{
		Use:   "logs ID [-f] [--attempt N | --previous]",
		Short: "Print a task's output, or every task's of a job, each line prefixed with its task (-f follows; --previous: the attempt before this one)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.AttemptSet = cmd.Flags().Changed("attempt")
			if err := o.Check(); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			err = cli.Logs(cmd.Context(), c, cmd.OutOrStdout(), args[0], o)
			var ae *cli.APIError
			if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				// Not a task: a job's?
				if jerr := cli.JobLogs(cmd.Context(), c, cmd.OutOrStdout(), args[0], o); jerr == nil || !errors.As(jerr, &ae) || ae.Status != http.StatusNotFound {
					return jerr
				}
				return fmt.Errorf("no task or job %q", args[0])
			}
			return err
		},
		ValidArgsFunction: completeName(&f, "task"),
	}
	f.add(logs)
	logs.Flags().BoolVarP(&o.Follow, "follow", "f", false, "stream new output until the task ends")
	logs.Flags().IntVar(&o.Attempt, "attempt", 0, "the output of this attempt (0 is the first run, as in describe's Attempts; default: the current one)")
	logs.Flags().BoolVarP(&o.Previous, "previous", "p", false, "the output of the last earlier attempt (before a re-queue or retry)")
	return logs
}

func newComplete() *cobra.Command {
	var f clientFlags
	var exitCode int
	complete := &cobra.Command{
		Use:   "complete ID",
		Short: "Report a lease finished (its devices are freed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return cli.Complete(cmd.Context(), c, cmd.OutOrStdout(), args[0], exitCode)
		},
		ValidArgsFunction: completeName(&f, "task"),
	}
	f.add(complete)
	complete.Flags().IntVar(&exitCode, "exit-code", 0, "the lease holder's outcome (non-zero: failed)")
	return complete
}

func newRenew() *cobra.Command {
	var f clientFlags
	renew := &cobra.Command{
		Use:   "renew ID",
		Short: "Extend a lease by its lease duration",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return cli.Renew(cmd.Context(), c, cmd.OutOrStdout(), args[0])
		},
		ValidArgsFunction: completeName(&f, "task"),
	}
	f.add(renew)
	return renew
}

// readSpecFlag reads the file -f names (- is standard input) as JSON.
func readSpecFlag(cmd *cobra.Command, file string) ([]byte, error) {
	if file == "" {
		return nil, fmt.Errorf("-f: a file is required")
	}
	return cli.ReadSpec(file, cmd.InOrStdin())
}
