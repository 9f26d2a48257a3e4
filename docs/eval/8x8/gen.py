#!/usr/bin/env python3
"""Makes the 8x8 traces of docs/evaluation.md §7 from the Philly trace:
a cluster of 8 nodes of 8 GPUs, and for each share of multi-node jobs
(9 to 64 GPUs: 0, 2, 5 and 10 % of the jobs) 1,000 jobs drawn with
replacement from Philly's jobs of that size class (1 to 8 GPUs, or 9 to
64), with their run times, arriving as a Poisson process at 90 % of the
cluster's GPU capacity. Deterministic (seed 43).

  python3 docs/eval/8x8/gen.py ../shared/traces/philly/philly.csv docs/eval/8x8
writes nodes.yaml and jobs-mN.csv there (N: the multi-node share, %)."""
import csv
import random
import sys

src, out = sys.argv[1], sys.argv[2]
small, wide = [], []
for r in csv.DictReader(open(src)):
    g, d = int(float(r["num_gpus"])), float(r["duration"])
    if d <= 0 or g < 1:
        continue
    (small if g <= 8 else wide if g <= 64 else []).append((g, d))
with open(out + "/nodes.yaml", "w") as f:
    f.write("# 8 nodes of 8 GPUs (gen.py)\nnodes:\n")
    for i in range(8):
        f.write("- name: n%d\n  capacity: {cpu: 64, memory: 512Gi}\n  devices:\n" % i)
        for d in range(8):
            f.write("  - {type: nvidia.com/gpu, id: \"%d\", model: V100}\n" % d)
for share in (0, 2, 5, 10):
    rng = random.Random(43 + share)
    jobs = [rng.choice(wide) if rng.random() < share / 100 else rng.choice(small) for _ in range(1000)]
    work = sum(g * d for g, d in jobs) / len(jobs)  # GPU-seconds a job
    rate = 0.9 * 64 / work  # jobs a second
    t = 0.0
    with open(out + "/jobs-m%d.csv" % share, "w") as f:
        f.write("id,submit,duration,gpus\n")
        for i, (g, d) in enumerate(jobs):
            t += rng.expovariate(rate)
            f.write("j%d,%.0f,%.0f,%d\n" % (i, t, d, g))
    print("m%d: %d jobs, %.1f%% over 8 GPUs, %.1f%% of GPU time" % (
        share, len(jobs), 100 * sum(g > 8 for g, _ in jobs) / len(jobs),
        100 * sum(g * d for g, d in jobs if g > 8) / sum(g * d for g, d in jobs)))
