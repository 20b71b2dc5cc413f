#!/usr/bin/env bash
# A synthetic cluster dump for timing `ferrosched simulate` on large clusters:
#   benches/scripts/simulate-dump.sh 5000 > /tmp/dump-5000.yaml
#   ferrosched simulate --cluster /tmp/dump-5000.yaml --pod-template examples/web-deployment.yaml --max 50000
# NODES nodes (default 5000) in three zones: 16 CPU / 64Gi / 110 pods each, every tenth
# with 8 nvidia.com/gpu. Each node already runs two bound pods (1-3 CPU, 2-6Gi, varying
# with the node's number); PENDING pods (default 200, 500m / 1Gi) wait to be scheduled.
set -euo pipefail
nodes=${1:-5000}
pending=${2:-200}
awk -v nodes="$nodes" -v pending="$pending" 'BEGIN {
  for (i = 0; i < nodes; i++) {
    n = sprintf("node-%05d", i)
    zone = "zone-" substr("abc", i % 3 + 1, 1)
    gpu = (i % 10 == 0) ? ", nvidia.com/gpu: \"8\"" : ""
    printf "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: {kubernetes.io/hostname: %s, topology.kubernetes.io/zone: %s}\nstatus:\n  allocatable: {cpu: \"16\", memory: 64Gi, pods: \"110\"%s}\n", n, n, zone, gpu
    for (j = 0; j < 2; j++) {
      cpu = (i + j) % 3 + 1
      mem = 2 * ((i + 2 * j) % 3 + 1)
      printf "---\napiVersion: v1\nkind: Pod\nmetadata: {name: run-%d-%d, namespace: default, uid: run-%d-%d}\nspec:\n  nodeName: %s\n  containers: [{name: c, image: app, resources: {requests: {cpu: \"%d\", memory: %dGi}}}]\nstatus: {phase: Running}\n", i, j, i, j, n, cpu, mem
    }
  }
  for (k = 0; k < pending; k++) {
    printf "---\napiVersion: v1\nkind: Pod\nmetadata: {name: pending-%d, namespace: default, uid: pending-%d}\nspec:\n  containers: [{name: c, image: app, resources: {requests: {cpu: 500m, memory: 1Gi}}}]\n", k, k
  }
}'
