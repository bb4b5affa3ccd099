#!/usr/bin/env bash
# Check by hand, in a real terminal (tmux), the console's logs pane against `drover dev`:
# run a job that prints numbered lines on the dev cluster's real agent, open its
# allocation's logs with `l`, see new lines arrive while following, scroll up (paused),
# switch to stderr with `e`, and close with esc. Every wait polls the captured screen until
# a deadline; nothing sleeps hoping.
#
# Usage: tests/tmux/logs.sh               (builds target/debug/drover first)
# Environment:
#   DROVER          the binary (default: target/debug/drover, built if missing)
#   DROVER_ADDR     the dev server's address (default: http://127.0.0.1:4647)
#   WAIT_SECS       how long each step may take (default: 30)
set -euo pipefail

cd "$(dirname "$0")/../.."
DROVER=${DROVER:-target/debug/drover}
ADDR=${DROVER_ADDR:-http://127.0.0.1:4647}
WAIT_SECS=${WAIT_SECS:-30}
SESSION="drover-logs-e2e-$$"
JOB_FILE=$(mktemp --suffix=.nomad.hcl)

if [[ ! -x "$DROVER" ]]; then
    cargo build -p drover-cli
fi
command -v tmux >/dev/null || { echo "tmux is required" >&2; exit 2; }

cleanup() {
    DROVER_ADDR=$ADDR "$DROVER" job stop -detach printer >/dev/null 2>&1 || true
    tmux kill-session -t "$SESSION" 2>/dev/null || true
    rm -f "$JOB_FILE"
}
trap cleanup EXIT

screen() {
    tmux capture-pane -p -t "$SESSION:console"
}

wait_for() {
    local pattern=$1 what=$2
    local deadline=$((SECONDS + WAIT_SECS))
    while ((SECONDS < deadline)); do
        if screen | grep -Eq -- "$pattern"; then
            echo "ok: $what"
            return 0
        fi
        sleep 0.2
    done
    echo "FAILED: $what (no /$pattern/ on screen within ${WAIT_SECS}s); screen was:" >&2
    screen >&2
    exit 1
}

keys() {
    tmux send-keys -t "$SESSION:console" "$@"
}

# Only the real agent registers an endpoint, so the constraint keeps the job off the
# simulated nodes.
cat > "$JOB_FILE" <<'JOB'
job "printer" {
  datacenters = ["dc1"]
  group "print" {
    constraint {
      attribute = "${attr.drover.agent.address}"
      operator  = "is_set"
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "i=0; while [ $i -lt 3000 ]; do echo out line $i; echo err line $i >&2; i=$((i+1)); sleep 0.2; done"]
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
JOB

tmux new-session -d -s "$SESSION" -n dev -x 120 -y 40 "$DROVER dev --no-sample-job --bind ${ADDR#*://}; sleep 600"
deadline=$((SECONDS + WAIT_SECS))
until DROVER_ADDR=$ADDR "$DROVER" job run -detach "$JOB_FILE" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
        echo "FAILED: the printer job could not be registered" >&2
        exit 1
    fi
    sleep 0.5
done
echo "ok: the printer job is registered"

tmux new-window -d -t "$SESSION" -n console -- \
    bash -c "NO_COLOR=1 $DROVER console --address $ADDR; echo console-exited-\$?; sleep 600"
tmux resize-window -t "$SESSION:console" -x 120 -y 40 2>/dev/null || true
wait_for "● .*${ADDR##*:}" "the console connects"

keys : j o b s Enter
wait_for 'printer' "the jobs view lists the printer"
keys / p r i n t e r Enter Enter
wait_for 'running' "its allocation runs"
keys l
wait_for 'logs [0-9a-f]{8}( server)? stdout \(following\)' "l opens the pane, following"
wait_for 'out line [0-9]+' "the task's output shows"
first=$(screen | grep -Eo 'out line [0-9]+' | tail -1 | awk '{print $3}')
wait_for "out line $((first + 3))\b" "new lines arrive while following"
keys k k k
wait_for 'paused, 3 newer' "scrolling up pauses"
keys G
wait_for '\(following\)' "G follows again"
keys e
wait_for 'stderr \(following\)' "e switches to stderr"
wait_for 'err line [0-9]+' "stderr shows"
keys Escape
wait_for 'allocations' "esc closes the pane"

keys q
echo "console logs pane: 1 passed, 0 failed"
