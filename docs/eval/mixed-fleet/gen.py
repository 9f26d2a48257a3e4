#!/usr/bin/env python3
"""Makes the mixed fleet of docs/evaluation.md §6: CPU services of 48, 96
and 192 cores (a 192-core service takes a whole CPU node) and GPU jobs of
1-8 GPUs, over 7 days; then a fleet of 192-core CPU nodes and 8-GPU nodes
sized at 1.1x the workload's peak demand (what it asks at the busiest
moment if every job ran on arrival). Deterministic (seed 43).

  python3 docs/eval/mixed-fleet/gen.py docs/eval/mixed-fleet
writes nodes.yaml and jobs.csv there."""
import math
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = random.Random(43)
DAYS = 7
jobs = []
t = 0.0
while True:  # CPU services: about 7 an hour, 8 h on average
    t += rng.expovariate(7.0 / 3600)
    if t > DAYS * 86400:
        break
    cores = rng.choices([48, 96, 192], weights=[50, 30, 20])[0]
    dur = max(600, rng.lognormvariate(math.log(8 * 3600) - 0.5, 1.0))
    jobs.append((t, dur, cores, 0, "role=cpu"))
t = 0.0
while True:  # GPU jobs: about 5 an hour, 4 h on average, 12 cores a GPU
    t += rng.expovariate(5.0 / 3600)
    if t > DAYS * 86400:
        break
    gpus = rng.choice([1, 2, 4, 8])
    dur = max(600, rng.lognormvariate(math.log(4 * 3600) - 0.5, 1.0))
    jobs.append((t, dur, 12 * gpus, gpus, "role=gpu"))
jobs.sort()


def peak(kind):
    ev = []
    for s, d, c, g, sel in jobs:
        if sel == kind:
            q = c if kind == "role=cpu" else g
            ev += [(s, q), (s + d, -q)]
    ev.sort(key=lambda e: (e[0], e[1]))
    cur = best = 0
    for _, q in ev:
        cur += q
        best = max(best, cur)
    return best


cpu_nodes = math.ceil(1.1 * peak("role=cpu") / 192)
gpu_nodes = math.ceil(1.1 * peak("role=gpu") / 8)
with open(out + "/nodes.yaml", "w") as f:
    f.write("# %d CPU nodes (192 cores) and %d 8-GPU nodes: 1.1x the peak demand of jobs.csv (gen.py)\nnodes:\n" % (cpu_nodes, gpu_nodes))
    for i in range(cpu_nodes):
        f.write("- name: cpu-%02d\n  labels: {role: cpu}\n  capacity: {cpu: 192, memory: 768Gi}\n" % i)
    for i in range(gpu_nodes):
        f.write("- name: gpu-%02d\n  labels: {role: gpu}\n  capacity: {cpu: 96, memory: 1Ti}\n  devices:\n" % i)
        for d in range(8):
            f.write("  - {type: nvidia.com/gpu, id: \"%d\", model: H100}\n" % d)
with open(out + "/jobs.csv", "w") as f:
    f.write("id,submit,duration,cpu,gpus,memory,selector\n")
    for i, (s, d, c, g, sel) in enumerate(jobs):
        f.write("j%04d,%d,%d,%d,%d,%d,%s\n" % (i, s, d, c, g, 4 * c, sel))
print("%d jobs; %d CPU nodes, %d GPU nodes" % (len(jobs), cpu_nodes, gpu_nodes))
