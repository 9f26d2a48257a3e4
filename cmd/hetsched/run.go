package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// newRun is `hetsched run [flags] -- CMD ARGS...`: one command task
// without a file.
func newRun() *cobra.Command {
	var f clientFlags
	var spec cli.RunSpec
	var wait waitFlag
	var priority int
	var detach bool
	var deps string
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD ARGS...",
		Short: "Run one command task as srun does: its output streamed, Ctrl-C cancels it, the exit code is its (-d: submit and return)",
		Example: `  hetsched run --gpu 1 --model H100 --memory 16Gi -- python3 train.py --epochs 1   # waits, streams, exits with its code
  hetsched run -d --gpu 0.5 --env MODEL=small -- ./serve                            # submit and return (sbatch)
  hetsched run --wait=placed:30s --gpu 1 -- ./job                                   # return once placed
  hetsched run -d --dependency afterok:prep,afternotok:train -- ./report            # starts once prep succeeded and train failed
  hetsched run -d --label app=web --anti-affinity hetsched.io/node --host-port 8080 -- ./serve`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			before, command := args, []string(nil)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				before, command = args[:dash], args[dash:]
			}
			before, err := wait.takeArg(before)
			if err != nil {
				return err
			}
			if command == nil {
				command = before
			} else if len(before) > 0 {
				return fmt.Errorf("unexpected %q before --: the command goes after --", before[0])
			}
			spec.Command = command
			if cmd.Flags().Changed("priority") {
				spec.Priority = &priority
			}
			if detach && wait.m.On {
				return fmt.Errorf("--detach and --wait: give one")
			}
			if spec.Depends, err = cli.ParseDependencyFlag(deps); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			if c.Token == "" {
				spec.User = cli.LocalUser() // with a token, the server knows who it is
			}
			// Ctrl-C (or SIGTERM) cancels the task the command follows.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return cli.Run(ctx, c, cmd.OutOrStdout(), cmd.ErrOrStderr(), spec, wait.m, detach, f.output)
		},
	}
	f.addAs(cmd, "request-timeout")
	fl := cmd.Flags()
	fl.StringVar(&spec.ID, "id", "", "the task's id (makes the submission idempotent; default: generated)")
	fl.StringVar(&spec.Name, "name", "", "the task's name")
	fl.StringVar(&spec.Queue, "queue", "", "the task's queue")
	fl.IntVar(&priority, "priority", 2, "0 urgent, 1 high, 2 medium, 3 low")
	fl.StringVar(&spec.CPU, "cpu", "1", "CPUs (2, 500m)")
	fl.StringVar(&spec.Memory, "memory", "", "memory (4Gi)")
	fl.Float64Var(&spec.GPU, "gpu", 0, "GPUs ("+cli.GPUType+"); below 1 a share of one (0.5)")
	fl.Float64Var(&spec.TPU, "tpu", 0, "TPUs ("+cli.TPUType+")")
	fl.StringVar(&spec.Model, "model", "", "device model of --gpu or --tpu: as the nodes name it (H100-80GB) or its family (H100; A100 is any A100 model there is); a model no node has is refused, naming those there are")
	fl.StringArrayVar(&spec.Env, "env", nil, "KEY=VALUE in the command's environment (repeatable)")
	fl.DurationVar(&spec.Timeout, "timeout", 0, "the task's maximum run time (then it is killed: state timeout)")
	fl.StringArrayVar(&spec.Labels, "label", nil, "KEY=VALUE: a label of the task (its metadata), for other tasks' affinity and spread (repeatable)")
	fl.StringArrayVar(&spec.HostPorts, "host-port", nil, "PORT or PORT/UDP: a port of the node the task holds (repeatable)")
	fl.StringArrayVar(&spec.Affinity, "affinity", nil, "TOPOLOGYKEY (beside the tasks with its labels) or SELECTOR@TOPOLOGYKEY (app=cache@zone): run in a domain where such tasks run (repeatable)")
	fl.StringArrayVar(&spec.AntiAffinity, "anti-affinity", nil, "TOPOLOGYKEY (hetsched.io/node: one per node) or SELECTOR@TOPOLOGYKEY: stay out of domains where such tasks run (repeatable)")
	fl.StringArrayVar(&spec.Spread, "spread", nil, "TOPOLOGYKEY[:MAXSKEW]: keep the tasks with its labels even across the key's domains (repeatable)")
	fl.BoolVar(&spec.NoPreempt, "no-preempt", false, "never evict other tasks for this one (preemptionPolicy never)")
	fl.StringVar(&deps, "dependency", "", dependencyHelp)
	fl.BoolVarP(&detach, "detach", "d", false, "submit and return (sbatch), without following the task")
	wait.add(cmd, "instead of following the output: wait for the end (=DUR: at most DUR) or =placed[:DUR] for placement (default 2s); not placed in time or failed: exit non-zero with the reason")
	return cmd
}
