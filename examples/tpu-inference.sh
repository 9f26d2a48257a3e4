#!/bin/sh
# TPU inference through leases: an inference gateway asks for a TPU chip
# (or, 0.8x as fast, a GPU) with POST /api/v1/schedule, uses the device it
# was given, and completes the lease; a lease not renewed in 30s expires.
# Nothing runs on the agent: the caller holds the device.
#   examples/tpu-inference.sh           (needs a running `hetsched up`)
#   HETSCHED="./hetsched" examples/tpu-inference.sh   (a built binary)
set -eu
H="${HETSCHED:-go run ./cmd/hetsched}"
run="$(date +%s)-$$"
ids=""
for i in 0 1 2 3; do
  id="infer-$run-$i"
  ids="$ids $id"
  printf '{"id": "%s", "name": "tpu-inference", "priority": 1, "lease": "30s",
    "resources": {"cpu": "1", "google.com/tpu": 1},
    "alternatives": [{"resources": {"cpu": "1", "nvidia.com/gpu": 1}, "speed": 0.8}]}' "$id" |
    $H submit -f - --wait=placed:10s
done
for id in $ids; do
  echo "serving requests on the device of $id ..."
  sleep 1
  $H renew "$id"
  $H complete "$id"
done
