#!/usr/bin/env bash
# End-to-end check of the operator console in a real terminal (tmux) against `drover dev`:
# open the console, offline a node with the keyboard and see it move to offlined, online it
# back, pause a worker and see it paused, then resume it. Every wait polls the captured
# screen until a deadline; nothing sleeps hoping.
#
# Usage: tests/tmux/console.sh            (builds target/debug/drover first)
# Environment:
#   DROVER          the binary (default: target/debug/drover, built if missing)
#   DROVER_ADDR     the dev server's address (default: http://127.0.0.1:4647)
#   DEV_ARGS        extra arguments for `drover dev`
#   WAIT_SECS       how long each step may take (default: 30)
set -euo pipefail

cd "$(dirname "$0")/../.."
DROVER=${DROVER:-target/debug/drover}
ADDR=${DROVER_ADDR:-http://127.0.0.1:4647}
WAIT_SECS=${WAIT_SECS:-30}
SESSION="drover-console-e2e-$$"

if [[ ! -x "$DROVER" ]]; then
    cargo build -p drover-cli
fi
command -v tmux >/dev/null || { echo "tmux is required" >&2; exit 2; }

cleanup() {
    tmux kill-session -t "$SESSION" 2>/dev/null || true
}
trap cleanup EXIT

screen() {
    tmux capture-pane -p -t "$SESSION:console"
}

# wait_for PATTERN WHAT: polls the console's screen until the extended regex matches.
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

tmux new-session -d -s "$SESSION" -n dev -x 120 -y 40 "$DROVER dev ${DEV_ARGS:-}; sleep 600"
tmux new-window -d -t "$SESSION" -n console -- \
    bash -c "NO_COLOR=1 $DROVER console --address $ADDR; echo console-exited-\$?; sleep 600"
tmux resize-window -t "$SESSION:console" -x 120 -y 40 2>/dev/null || true

wait_for '● .*4647' "the console connects"
wait_for 'healthy [1-9]' "nodes turn healthy"
wait_for 'offlined 0 ' "no node is offlined yet"

# Offline the selected (first healthy) node: o, move to Confirm, enter.
keys o
wait_for '\[ Cancel \]  \[ Confirm \]' "offlining asks for confirmation"
keys Right Enter
wait_for 'offlined 1 ' "the header counts one offlined node"
# Show only offlined nodes: g cycles all -> healthy -> new -> lost -> flaky -> offlined.
keys g g g g g
wait_for 'nodes \(1\) · offlined' "the offlined group lists the node"
wait_for 'offlined +(ready|initializing|down)' "the node's row says offlined"

# Online it back (no confirmation: it is not destructive).
keys O
wait_for 'offlined 0 ' "the node left the offlined set"
keys g
wait_for 'nodes \([0-9]+\) ' "back to every node"

# Pause the first worker, see it paused, resume it.
keys : w o r k e r s Enter
wait_for 'workers \([1-9]' "the workers view lists workers"
keys p
wait_for '\[ Cancel \]  \[ Confirm \]' "pausing asks for confirmation"
keys Right Enter
wait_for ' (pausing|paused) ' "the worker is pausing or paused"
keys r
wait_for 'resuming worker' "the resume is sent"
wait_for 'started ' "the worker runs again"

keys q
deadline=$((SECONDS + WAIT_SECS))
until screen | grep -q 'console-exited-0'; do
    if ((SECONDS >= deadline)); then
        echo "FAILED: the console did not exit cleanly on q" >&2
        screen >&2
        exit 1
    fi
    sleep 0.2
done
echo "ok: q quits and gives the terminal back"
echo "console end-to-end: 1 passed, 0 failed"
