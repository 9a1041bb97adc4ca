#!/usr/bin/env bash
# Stop the cluster that sbatch/local-cluster/start.sh started from LOCAL_CLUSTER_DIR
# (default <repo>/.local-cluster): cancel its jobs, stop its daemons (by their pid files), end
# job steps the daemons left behind, and stop munged if start.sh started it. Keeps the state
# directory (config, logs, job-completion file). Stopping a cluster that is not running is fine.
set -euo pipefail

say() { echo "stop.sh: $*" >&2; }

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SLURM_CONF=$conf

stop_pids() {  # stop_pids PID...: SIGTERM, then SIGKILL what is still running after 10 s
    (($# == 0)) && return 0
    kill -TERM "$@" 2>/dev/null || true
    local deadline=$((SECONDS + 10)) pid
    for pid in "$@"; do
        while running "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
        if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
}

cancel_jobs() {  # cancel every job not yet finished and wait (up to 15 s) for them to end
    local jobs
    mapfile -t jobs < <(squeue -h -t PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING -o %A 2>/dev/null)
    ((${#jobs[@]} > 0)) || return 0
    say "cancelling jobs: ${jobs[*]}"
    scancel "${jobs[@]}" 2>/dev/null || true
    local deadline=$((SECONDS + 15))
    while [[ -n $(squeue -h -t PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING -o %A 2>/dev/null) ]] &&
        ((SECONDS < deadline)); do
        sleep 0.2
    done
}

leftover_steps() {  # slurmstepd processes of this cluster: their working directory is a node's spool
    local pid cwd
    for pid in $(pgrep -x slurmstepd || true); do
        cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || continue
        [[ $cwd == "$dir/nodes/"* ]] && echo "$pid"
    done
    return 0
}

[[ -f $SLURM_CONF ]] || { say "no cluster configured in $dir; nothing to stop"; exit 0; }

ctld=$(pid_of "$dir/ctld/slurmctld.pid" slurmctld)
[[ -z $ctld ]] || cancel_jobs
daemons=()
for pidfile in "$dir"/nodes/*/slurmd.pid; do
    pid=$(pid_of "$pidfile" slurmd)
    [[ -z $pid ]] || daemons+=("$pid")
done
say "stopping ${#daemons[@]} slurmd${ctld:+ and slurmctld} of $dir"
[[ -z $ctld ]] || daemons+=("$ctld")
stop_pids "${daemons[@]}"
mapfile -t steps < <(leftover_steps)
if ((${#steps[@]} > 0)); then
    say "ending leftover job steps: ${steps[*]}"
    kill -KILL "${steps[@]}" 2>/dev/null || true
fi
munged=$(pid_of "$dir/munged.pid" munged)
[[ -z $munged ]] || stop_pids "$munged"
rm -f "$dir/munged.pid"
