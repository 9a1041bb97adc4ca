#!/usr/bin/env bash
# Start a real Slurm 22.05 cluster on this host: one slurmctld and N slurmd daemons (nodes n[1-N]).
#
#   sbatch/local-cluster/start.sh [N]          # N defaults to 4
#   eval "$(sbatch/local-cluster/start.sh 4)"  # the last line of stdout is `export SLURM_CONF=...`
#
# Installs slurmctld, slurmd, slurm-client and munge with apt when they are missing. Idempotent:
# with the same settings and a cluster already running it only starts missing daemons.
# Stop it with sbatch/local-cluster/stop.sh (same LOCAL_CLUSTER_DIR).
#
# Settings (environment):
#   LOCAL_CLUSTER_DIR        all state: config, spool, logs, pid files   [<repo>/.local-cluster]
#   LOCAL_CLUSTER_CPUS       CPUs each node advertises                   [4]
#   LOCAL_CLUSTER_AUTH       munge | none (auth/none + cred/none, no munged)  [munge]
#   LOCAL_CLUSTER_PORT       slurmctld port; nodes use the next N ports   [6817]
#   LOCAL_CLUSTER_PARTITION  name of the (default) partition holding all nodes  [local]
set -euo pipefail

die() { echo "start.sh: $*" >&2; exit 1; }
say() { echo "start.sh: $*" >&2; }

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
nodes=${1:-4}
cpus=${LOCAL_CLUSTER_CPUS:-4}
auth=${LOCAL_CLUSTER_AUTH:-munge}
port=${LOCAL_CLUSTER_PORT:-6817}
partition=${LOCAL_CLUSTER_PARTITION:-local}

[[ $nodes =~ ^[1-9][0-9]*$ ]] || die "N='$nodes' is not a node count; use a positive integer, e.g. start.sh 4"
[[ $cpus =~ ^[1-9][0-9]*$ ]] || die "LOCAL_CLUSTER_CPUS='$cpus' is not a CPU count; use a positive integer"
[[ $port =~ ^[1-9][0-9]*$ ]] || die "LOCAL_CLUSTER_PORT='$port' is not a port number"
[[ $auth == munge || $auth == none ]] || die "LOCAL_CLUSTER_AUTH='$auth' is unknown; use munge or none"
[[ $partition =~ ^[A-Za-z0-9_-]+$ ]] || die "LOCAL_CLUSTER_PARTITION='$partition' is not a valid partition name"
[[ $EUID -eq 0 ]] || die "must run as root (slurmd starts jobs as their users); run: sudo $0 $nodes"

started=${EPOCHREALTIME/./}

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    { [[ $auth == none ]] || command -v munged >/dev/null; } || missing+=(munge)
    ((${#missing[@]} == 0)) && return
    say "installing ${missing[*]} (apt)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >&2
}

wait_for() {  # wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

render_config() {
    local node_ports=$((port + 1))
    ((nodes > 1)) && node_ports="[$((port + 1))-$((port + nodes))]"
    local cred=munge
    [[ $auth == none ]] && cred=none
    sed -e "s|@DIR@|$dir|g" -e "s|@NODES@|$nodes|g" -e "s|@CPUS@|$cpus|g" \
        -e "s|@CTLD_PORT@|$port|g" -e "s|@NODE_PORTS@|$node_ports|g" \
        -e "s|@AUTH@|$auth|g" -e "s|@CRED@|$cred|g" -e "s|@PARTITION@|$partition|g" \
        "$here/slurm.conf.in"
}

munge_works() { munge -n | unmunge; }

start_munge() {
    [[ $auth == munge ]] || return 0
    munge_works >/dev/null 2>&1 && return 0  # a munged is already serving this host
    [[ -s /etc/munge/munge.key ]] || die "/etc/munge/munge.key is missing; create it with: mungekey -c (then chown munge: /etc/munge/munge.key), or use LOCAL_CLUSTER_AUTH=none"
    install -d -o munge -g munge -m 0755 /run/munge
    runuser -u munge -- /usr/sbin/munged
    wait_for 5 munge_works ||
        die "munged did not come up (see /var/log/munge/munged.log); or use LOCAL_CLUSTER_AUTH=none"
    cp /run/munge/munged.pid "$dir/munged.pid"  # ours: stop.sh stops it
}

all_nodes_up() {  # every node answers and none is down, drained or not responding
    local states
    states=$(sinfo -h -N -o '%T' 2>/dev/null) || return 1
    [[ $(wc -l <<<"$states") -eq $nodes ]] || return 1
    ! grep -qvE '^(idle|allocated|mixed|completing)$' <<<"$states"
}

install_packages
mkdir -p "$dir/ctld"
for ((i = 1; i <= nodes; i++)); do mkdir -p "$dir/nodes/n$i"; done
render_config >"$conf.new"

if [[ -n $(pid_of "$dir/ctld/slurmctld.pid" slurmctld) ]]; then
    cmp -s "$conf" "$conf.new" || {
        rm -f "$conf.new"
        die "a cluster with other settings is running from $dir; stop it first: $here/stop.sh"
    }
    rm -f "$conf.new"
    say "slurmctld already running from $dir"
else
    mv "$conf.new" "$conf"
fi
export SLURM_CONF=$conf

start_munge
[[ -n $(pid_of "$dir/ctld/slurmctld.pid" slurmctld) ]] || slurmctld -f "$conf" ||
    die "slurmctld failed to start; see $dir/ctld/slurmctld.log"
for ((i = 1; i <= nodes; i++)); do
    [[ -n $(pid_of "$dir/nodes/n$i/slurmd.pid" slurmd) ]] || slurmd -f "$conf" -N "n$i" ||
        die "slurmd for node n$i failed to start; see $dir/nodes/n$i/slurmd.log"
done

wait_for 30 all_nodes_up || {
    sinfo -N >&2 || true
    die "nodes not up after 30 s; see $dir/ctld/slurmctld.log and $dir/nodes/*/slurmd.log"
}
elapsed_ms=$(((${EPOCHREALTIME/./} - started) / 1000))
say "$nodes nodes up ($cpus CPUs each, auth/$auth, partition $partition)" \
    "in $((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) s"
echo "export SLURM_CONF=$conf"
