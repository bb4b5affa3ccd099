#!/usr/bin/env bash
# Starts three `drover server` processes (the release binary by default; DROVER=path
# for another), waits for a leader, SIGKILLs it, and times until a survivor names a new
# leader. Run from the repository root after `cargo build --release -p drover-cli`.
set -u
D=${DROVER:-target/release/drover}
S=test-cluster-secret-0123
W=$(mktemp -d)
for i in 1 2 3; do
  peers=""; for j in 1 2 3; do peers="$peers --peer $j=127.0.0.1:1820$j"; done
  $D server --server-id $i --data-dir $W/d$i --bind 127.0.0.1:1810$i --raft-addr 127.0.0.1:1820$i --cluster-secret $S --no-metrics $peers > $W/s$i.log 2>&1 &
  echo $! > $W/pid$i
done
leader=""
for _ in $(seq 100); do
  leader=$($D server members --address 127.0.0.1:18101 -json 2>/dev/null | python3 -c 'import json,sys; print(next((m["id"] for m in json.load(sys.stdin) if m["role"]=="leader"),""))' 2>/dev/null)
  [ -n "$leader" ] && break; sleep 0.1
done
sleep 1
other=$(( leader % 3 + 1 ))
start=$(date +%s.%N)
kill -9 $(cat $W/pid$leader)
while :; do
  new=$($D server members --address 127.0.0.1:1810$other -json --timeout 1s 2>/dev/null | python3 -c 'import json,sys; print(next((m["id"] for m in json.load(sys.stdin) if m["role"]=="leader"),""))' 2>/dev/null)
  if [ -n "$new" ] && [ "$new" != "$leader" ]; then break; fi
  sleep 0.02
done
end=$(date +%s.%N)
echo "leader $leader killed; $new leads after $(python3 -c "print(round($end-$start,2))") s"
for i in 1 2 3; do kill -INT $(cat $W/pid$i) 2>/dev/null; done
wait 2>/dev/null || true
rm -rf $W
