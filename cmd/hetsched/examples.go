package main

import "github.com/spf13/cobra"

// examples are the Examples sections of the commands that do not set
// their own, by command path (issue 45 §1.5: every command shows how).
var examples = map[string]string{
	"hetsched up": `  go run ./cmd/hetsched up                        # the server and in-process agents, on 127.0.0.1:7070
  go run ./cmd/hetsched up --queues queues.yaml   # with your queue tree`,
	"hetsched server": `  hetsched server --data-dir /var/lib/hetsched --nodes nodes.yaml --queues queues.yaml
  hetsched server --data-dir /var/lib/hetsched --node-pools pools.yaml --tokens tokens.yaml --tls-cert server.pem --tls-key server.key --listen :7070`,
	"hetsched agent": `  hetsched agent --server https://sched:7070 --token "$TOKEN"      # this machine, its devices discovered
  hetsched agent --name gpu-7 --devices devices.yaml --work-dir /var/lib/hetsched-agent`,
	"hetsched kube": `  hetsched kube --kubeconfig ~/.kube/config     # schedules the pods whose spec.schedulerName is hetsched`,
	"hetsched demo": `  hetsched demo        # the embedded fleet and workload in simulated time
  hetsched demo -q     # the summary only`,
	"hetsched policies": `  hetsched policies    # every policy, with what it filters and scores`,
	"hetsched sim": `  hetsched sim --cluster openb --workload openb:default --policy least-allocated,fgd --seeds 3
  hetsched sim --cluster synthetic:64 --workload philly:4000 --policy srtf,las --out results/`,
	"hetsched sim elastic": `  hetsched sim elastic                      # targets 50, 70 and 90 %, two simulated days
  hetsched sim elastic --targets 70 -o json`,
	"hetsched version": `  hetsched version -o json`,
	"hetsched completion": `  source <(hetsched completion bash)
  hetsched completion zsh > "${fpath[1]}/_hetsched"`,
	"hetsched apply": `  hetsched apply -f queues.yaml          # queues: (parents first), nodes:, services:, nodePools:
  hetsched apply -f services.yaml -o yaml`,
	"hetsched cancel": `  hetsched cancel train-1          # a task (else a job of that id)
  hetsched cancel job etl`,
	"hetsched logs": `  hetsched logs train-1 -f         # follow a task's output
  hetsched logs etl                # every task of job etl, each line prefixed
  hetsched logs train-1 --previous # the attempt before this one`,
	"hetsched complete":        `  hetsched complete infer-1 --exit-code 0   # a lease's holder is done with its devices`,
	"hetsched renew":           `  hetsched renew infer-1                    # keep a lease another lease period`,
	"hetsched cordon":          `  hetsched cordon gpu-a      # no new placements; its tasks stay`,
	"hetsched uncordon":        `  hetsched uncordon gpu-a`,
	"hetsched drain":           `  hetsched drain gpu-a       # no new placements, and its tasks move elsewhere`,
	"hetsched delete":          `  hetsched delete service web   # its replicas are stopped`,
	"hetsched rollout restart": `  hetsched rollout restart service web   # every replica replaced, within maxSurge and maxUnavailable`,
	"hetsched node release":    `  hetsched node release gpu-a   # forget a node (stop its agent first); its tasks are re-queued`,
	"hetsched store check":     `  hetsched store check --data-dir /var/lib/hetsched`,
	"hetsched store repair": `  hetsched store repair --data-dir /var/lib/hetsched          # says what it would do
  hetsched store repair --data-dir /var/lib/hetsched --yes    # keeps every record before the damage`,
	"hetsched certs init":   `  hetsched certs init --dir certs/     # a CA for the servers, agents and clients`,
	"hetsched certs server": `  hetsched certs server --dir certs/ --dns sched.example.com --ip 10.0.0.5`,
	"hetsched certs agent":  `  hetsched certs agent --dir certs/ --name gpu-7 --nodes 'gpu-*'`,
	"hetsched certs client": `  hetsched certs client --dir certs/ --name alice --role tenant --tenant team-a
  hetsched certs client --dir certs/ --name ops --role admin`,
	"hetsched certs member": `  hetsched certs member --dir certs/ --name s1 --dns s1.example.com --ip 10.0.0.11`,
}

// addExamples sets each command's Examples from examples where it has
// none.
func addExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			c.Example = examples[c.CommandPath()]
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
