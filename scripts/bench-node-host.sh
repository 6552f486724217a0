#!/usr/bin/env bash
# One node host with N emulated nodes against a one-member store and one API server, all on
# loopback: measures the node host's idle RSS and whether every lease is renewed on time.
#
#   scripts/bench-node-host.sh [NODES=5000] [SECONDS=600]
#
# Needs a release build (`cargo build --release -p kemu`). Prints RSS samples and the node
# host's lease metrics; everything lives in a temp dir that is removed at the end.
set -euo pipefail
NODES=${1:-5000}
DURATION=${2:-600}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KEMU=${KEMU:-$ROOT/target/release/kemu}
DIR=$(mktemp -d /tmp/kemu-node-bench.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -z "${KEEP:-}" ]; then rm -rf "$DIR"; else echo "kept $DIR"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM if "'"$1"'"=="udp" else socket.SOCK_STREAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
STORE_CLIENT=$(free_port udp); STORE_PEER=$(free_port udp)
API_HTTP=$(free_port tcp); API_QUIC=$(free_port udp); METRICS=$(free_port tcp)

"$KEMU" certs --dir "$DIR/certs" --store-members s1 --node-hosts nodehost-1 >/dev/null
"$KEMU" store --name s1 --data-dir "$DIR/s1" --listen-client 127.0.0.1:$STORE_CLIENT \
  --listen-peer 127.0.0.1:$STORE_PEER --initial-cluster s1=127.0.0.1:$STORE_PEER \
  --certs "$DIR/certs" 2>"$DIR/store.log" & PIDS+=($!)
sleep 2
"$KEMU" apiserver --store-endpoints 127.0.0.1:$STORE_CLIENT --certs "$DIR/certs" \
  --listen-http 127.0.0.1:$API_HTTP --listen-quic 127.0.0.1:$API_QUIC 2>"$DIR/apiserver.log" & PIDS+=($!)
# The API server serves HTTPS with client-certificate authentication; the admin certificate reads.
API=(curl -s --cacert "$DIR/certs/ca.crt" --cert "$DIR/certs/admin.crt" --key "$DIR/certs/admin.key")
until "${API[@]}" -f "https://127.0.0.1:$API_HTTP/readyz" >/dev/null; do sleep 0.2; done

START=$(date +%s)
"$KEMU" node-host --apiserver 127.0.0.1:$API_QUIC --certs "$DIR/certs" --identity nodehost-1 \
  --nodes "$NODES" --name-prefix bench- --runtime instant \
  --metrics-addr 127.0.0.1:$METRICS 2>"$DIR/nodehost.log" & NH=$!; PIDS+=($NH)

metric() { curl -s "http://127.0.0.1:$METRICS/metrics" | awk -v m="$1" '$1==m {print $2}'; }
until [ "$(metric kemu_node_host_nodes_registered 2>/dev/null || echo 0)" = "$NODES" ]; do sleep 1; done
echo "registered $NODES nodes in $(( $(date +%s) - START )) s"

rss() { awk '/VmRSS/ {print int($2/1024)}' /proc/$NH/status; }
BASE_RENEWALS=$(metric kemu_node_host_lease_renewals_total)
BASE_LATE=$(metric kemu_node_host_lease_late_total)
END=$(( $(date +%s) + DURATION ))
MAX_RSS=0
while [ "$(date +%s)" -lt "$END" ]; do
  R=$(rss); [ "$R" -gt "$MAX_RSS" ] && MAX_RSS=$R
  echo "t=$(( $(date +%s) - START ))s rss=${R}MB renewals=$(metric kemu_node_host_lease_renewals_total) late=$(metric kemu_node_host_lease_late_total) max_gap_ms=$(metric kemu_node_host_lease_max_gap_ms) failures=$(metric kemu_node_host_lease_failures_total) load=$(cut -d' ' -f1-3 /proc/loadavg)"
  sleep 30
done
RENEWALS=$(( $(metric kemu_node_host_lease_renewals_total) - BASE_RENEWALS ))
LATE=$(( $(metric kemu_node_host_lease_late_total) - BASE_LATE ))
echo "--- uptime: $(uptime)"
echo "nodes=$NODES duration=${DURATION}s idle_rss_max=${MAX_RSS}MB per_node=$(( MAX_RSS * 1024 / NODES ))KB"
MAX_GAP=$(metric kemu_node_host_lease_max_gap_ms)
echo "renewals=$RENEWALS expected~$(( NODES * DURATION / 10 )) late(>15s gap)=$LATE max_gap_ms=$MAX_GAP failures=$(metric kemu_node_host_lease_failures_total)"
if [ "$MAX_GAP" -lt 40000 ]; then
  echo "no node went 40 s without a renewal: none would be seen NotReady (40 s grace)"
else
  echo "SOME NODE WENT ${MAX_GAP} ms WITHOUT A RENEWAL: it would be seen NotReady (40 s grace)"
fi
curl -s "http://127.0.0.1:$METRICS/metrics" | grep lease_gap
READY=$("${API[@]}" "https://127.0.0.1:$API_HTTP/api/v1/nodes" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for n in d["items"] if any(c["type"]=="Ready" and c["status"]=="True" for c in n["status"]["conditions"])))')
echo "nodes Ready in the API: $READY"
