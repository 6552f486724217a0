#!/usr/bin/env bash
# Many pods held Running across the node hosts of one machine: RSS per pod of each node host.
#
#   scripts/bench-node-pods.sh [PODS=150000] [NODES=5000] [HOSTS=2] [RATE=500] [HOLD=120]
#
# Launches a cluster with `kemu up --detach` (one store member, one API server, one scheduler,
# HOSTS node hosts carrying NODES nodes, the `instant` runtime profile), samples every node
# host's RSS, creates PODS bare pods with `kemu load --no-delete` at RATE/s, waits until all are
# Running, holds them HOLD seconds, samples again and prints RSS per pod. Needs a release build
# (`cargo build --release -p kemu`) and several GB of memory. KEEP=1 keeps the cluster directory.
set -euo pipefail
PODS=${1:-150000}
NODES=${2:-5000}
HOSTS=${3:-2}
RATE=${4:-500}
HOLD=${5:-120}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KEMU=${KEMU:-$ROOT/target/release/kemu}
DIR=$(mktemp -d /tmp/kemu-node-pods.XXXXXX)
CLUSTER=$DIR/cluster
PER_HOST=$(( (NODES + HOSTS - 1) / HOSTS ))
# Room for the pods plus headroom: the scheduler spreads them, but not perfectly evenly.
PODS_PER_NODE=$(( PODS / NODES * 2 + 10 ))
[ "$PODS_PER_NODE" -lt 110 ] && PODS_PER_NODE=110
cleanup() {
  "$KEMU" down --dir "$CLUSTER" >/dev/null 2>&1 || true
  if [ -z "${KEEP:-}" ]; then rm -rf "$DIR"; else echo "kept $DIR"; fi
}
trap cleanup EXIT

cat >"$DIR/cluster.toml" <<EOF
name = "node-pods"
runtime = "instant"
[store]
members = 1
snapshot_entries = 200000
[apiserver]
replicas = 1
[scheduler]
replicas = 1
workers = 4
[controllers]
replicas = 0
[nodes]
hosts = $HOSTS
per_host = $PER_HOST
cpu = "256"
memory = "1024Gi"
pods = $PODS_PER_NODE
zones = ["zone-a", "zone-b", "zone-c"]
EOF

echo "uptime: $(uptime)"
"$KEMU" up -f "$DIR/cluster.toml" --dir "$CLUSTER" --detach

# pid of a component: nodehost-K by its identity, the others by their subcommand.
pid_of() {
  case "$1" in
    nodehost-*) pgrep -f -- "kemu node-host .*$CLUSTER/certs --identity $1 " | head -1 ;;
    *) pgrep -f -- "kemu $1 .*$CLUSTER/" | head -1 ;;
  esac
}
rss_mb() { awk '/VmRSS/ {printf "%d", $2/1024}' "/proc/$1/status"; }
COMPONENTS=(store apiserver scheduler)
for k in $(seq 1 "$HOSTS"); do COMPONENTS+=("nodehost-$k"); done
declare -A BEFORE
sample() {
  local line="" total=0
  for c in "${COMPONENTS[@]}"; do
    local pid; pid=$(pid_of "$c" || true)
    [ -z "$pid" ] && { line+=" $c=?"; continue; }
    local r; r=$(rss_mb "$pid"); line+=" $c=${r}MB"
  done
  echo "$line"
}
echo "before:$(sample)"
for k in $(seq 1 "$HOSTS"); do BEFORE[$k]=$(rss_mb "$(pid_of "nodehost-$k")"); done

START=$(date +%s)
"$KEMU" load --dir "$CLUSTER" --pods "$PODS" --rate "$RATE" --namespaces 20 --no-delete \
  --running-timeout 3600 --max-in-flight 256 --slo-pod-startup-p99-ms 3600000 \
  | tee "$DIR/load.txt" || echo "kemu load failed (exit $?)"
echo "created and Running after $(( $(date +%s) - START )) s; uptime: $(uptime)"
echo "running:$(sample)"
sleep "$HOLD"
echo "held ${HOLD}s:$(sample)"

TOTAL_BEFORE=0; TOTAL_AFTER=0; TOTAL_PODS=0
for k in $(seq 1 "$HOSTS"); do
  pid=$(pid_of "nodehost-$k")
  metrics=$(tr ' ' '\n' </proc/"$pid"/cmdline | tr '\0' '\n' | awk 'p {print; exit} /--metrics-addr/ {p=1}')
  started=$(curl -s "http://$metrics/metrics" | awk '$1=="kemu_node_host_pods_started_total" {print $2}')
  finished=$(curl -s "http://$metrics/metrics" | awk '$1=="kemu_node_host_pods_finished_total" {print $2}')
  held=$(( started - finished ))
  after=$(rss_mb "$pid")
  echo "nodehost-$k: pods held $held, RSS ${BEFORE[$k]} MB -> ${after} MB, $(( (after - BEFORE[$k]) * 1024 / (held > 0 ? held : 1) )) KB a pod"
  TOTAL_BEFORE=$(( TOTAL_BEFORE + BEFORE[$k] )); TOTAL_AFTER=$(( TOTAL_AFTER + after )); TOTAL_PODS=$(( TOTAL_PODS + held ))
done
echo "all node hosts: pods held $TOTAL_PODS, RSS $TOTAL_BEFORE MB -> $TOTAL_AFTER MB, $(( (TOTAL_AFTER - TOTAL_BEFORE) * 1024 / (TOTAL_PODS > 0 ? TOTAL_PODS : 1) )) KB a pod"
echo "uptime: $(uptime)"
