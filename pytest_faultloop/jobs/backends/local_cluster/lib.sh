# Shared by start.sh and stop.sh (sourced): where the cluster lives and which daemons are ours.
# shellcheck shell=bash disable=SC2034  # the variables are for the scripts that source this

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${LOCAL_CLUSTER_DIR:-$repo/.local-cluster}
[[ $dir == /* ]] || dir=$PWD/$dir
conf=$dir/slurm.conf

running() {  # running PID: the process exists and is not a zombie
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

pid_of() {  # pid_of PIDFILE COMM: the recorded pid if it still runs the program COMM, else nothing
    local pid
    [[ -s $1 ]] || return 0
    pid=$(cat "$1")
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    if running "$pid" && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]]; then echo "$pid"; fi
}
