#!/bin/bash
# tiny_gloo.sh - the tiny CPU data-parallel workload on torch.distributed gloo, under Slurm.
#
# One srun task per node runs the launcher, which starts that node's GPUS_PER_NODE ranks
# (emulated GPUs). Follows the seed's job-script contract:
#   in:  FAULT_TYPE FAULT_RANK FAULT_AT_ITER FAULT_DELAY EXPERIMENT_DIR BASE_EXPERIMENTS_DIR
#        GPUS_PER_NODE (sbatch --export=ALL,...); FAULT_TYPE unset means a clean run.
#   out: ${EXPERIMENT_DIR}/logs/slurm/${SLURM_JOB_ID}.${SLURM_RESTART_COUNT}.1.main_workload.log
#        (all ranks, "[rankN]: " prefixed), checkpoints/_dump_<rank> (flight recorder),
#        tensorboard/scalars.csv, fault_injection.json (when a fault is armed), job_ended
#        (written last, so the loop notices the end without waiting for its next queue poll).
# FAULTLOOP_LAUNCHER picks how each node starts its ranks: fork (default; one process imports
# torch and forks them) or torchrun (PyTorch's elastic agent, static rendezvous). The step's
# output (and srun's own messages) is appended to the log; FAULTLOOP_SRUN_LABEL=1 adds --label.
# Other variables: FAULTLOOP_PYTHON (the python with pytest_faultloop installed; python3),
# FAULTLOOP_COLLECTIVE_TIMEOUT, FAULTLOOP_STARTUP_TIMEOUT, FAULTLOOP_FR_STALL_S, FAULTLOOP_KILL_GRACE_S,
# FAULTLOOP_ITER_PERIOD_S, FAULTLOOP_EXIT_MARGIN_S, MASTER_ADDR, MASTER_PORT.
#
# Usage: sbatch --nodes=2 --output=$EXPERIMENT_DIR/logs/slurm/%j.launch.out \
#               --error=$EXPERIMENT_DIR/logs/slurm/%j.launch.err \
#               --export=ALL,FAULT_TYPE=SIGKILL,FAULT_RANK=1,EXPERIMENT_DIR=... sbatch/tiny_gloo.sh
#
# The local backend runs the same launcher without Slurm; it reads the next line:
# faultloop-local-launcher: pytest_faultloop.jobs.workload.launcher

#SBATCH --job-name=tiny-gloo
#SBATCH --time=00:05:00
#SBATCH --ntasks-per-node=1
#SBATCH --output=/tmp/slurm-%j.launch.out
#SBATCH --error=/tmp/slurm-%j.launch.err

set -u

log_msg() {
    local now
    now=$(date +%s)
    echo ">>> $1 ${now} ($(date -d "@${now}" '+%Y-%m-%d %H:%M:%S'))"
}

die() {
    echo "tiny_gloo.sh: $*" >&2
    exit 2
}

log_msg "START SBATCH"
echo "Running on nodes: ${SLURM_JOB_NODELIST:-?}"

export FAULT_AT_ITER="${FAULT_AT_ITER:-5}"
export FAULT_DELAY="${FAULT_DELAY:-1}"
export FAULT_RANK="${FAULT_RANK:-1}"
export GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
export BASE_EXPERIMENTS_DIR="${BASE_EXPERIMENTS_DIR:-${HOME}/nvrx-attr-experiments}"
export EXPERIMENT_DIR="${EXPERIMENT_DIR:-${BASE_EXPERIMENTS_DIR}/fault_injection/manual/n${SLURM_NNODES}_${FAULT_TYPE:-NONE}_r${FAULT_RANK}_i${FAULT_AT_ITER}}"
export SLURM_RESTART_COUNT="${SLURM_RESTART_COUNT:-0}"
export PYTHONUNBUFFERED=1
export TORCH_FR_BUFFER_SIZE="${TORCH_FR_BUFFER_SIZE:-2000}"
FAULTLOOP_PYTHON="${FAULTLOOP_PYTHON:-python3}"

mkdir -p "${EXPERIMENT_DIR}/logs/slurm" "${EXPERIMENT_DIR}/checkpoints" "${EXPERIMENT_DIR}/tensorboard" \
    || die "cannot create the experiment layout under EXPERIMENT_DIR=${EXPERIMENT_DIR}"
"${FAULTLOOP_PYTHON}" -c "import pytest_faultloop.jobs.workload.launcher" 2>/dev/null \
    || die "FAULTLOOP_PYTHON=${FAULTLOOP_PYTHON} cannot import pytest_faultloop (install it, or point FAULTLOOP_PYTHON at the python that has it)"

# Rank 0's rendezvous store runs on the first node; ask Slurm for that node's address, since
# node names need not resolve (several slurmd on one host share 127.0.0.1).
FIRST_NODE=$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | head -n 1)
NODE_ADDR=$(scontrol show node "${FIRST_NODE}" -o 2>/dev/null | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
export MASTER_ADDR="${MASTER_ADDR:-${NODE_ADDR:-${FIRST_NODE}}}"
# One port per job, derived from its id and below the kernel's ephemeral range (from 32768), so
# neither a concurrent job nor one of gloo's own connections can be holding it.
export MASTER_PORT="${MASTER_PORT:-$((25000 + SLURM_JOB_ID % 7000))}"
echo "Writing logs to ${EXPERIMENT_DIR}/logs; rendezvous ${MASTER_ADDR}:${MASTER_PORT}"

LOG="${EXPERIMENT_DIR}/logs/slurm/${SLURM_JOB_ID}.${SLURM_RESTART_COUNT}.1.main_workload.log"
# The launchers' own messages (why a rank was ended, configuration errors) stay out of the log.
export FAULTLOOP_LAUNCHER_NOTES="${FAULTLOOP_LAUNCHER_NOTES:-${EXPERIMENT_DIR}/logs/slurm/${SLURM_JOB_ID}.launcher.err}"
SRUN_LABEL=()
if [ "${FAULTLOOP_SRUN_LABEL:-0}" = 1 ]; then SRUN_LABEL=(--label); fi

log_msg "START main_workload (launcher ${FAULTLOOP_LAUNCHER:-fork})"
# Everything the step prints lands in the log, as on a real cluster: the nodes' output
# (torchrun's, or the fork launcher's ranks) and srun's and slurmstepd's own messages.
srun \
    "${SRUN_LABEL[@]}" \
    --ntasks-per-node=1 \
    --ntasks="${SLURM_NNODES}" \
    --kill-on-bad-exit=0 \
    --mpi=none \
    "${FAULTLOOP_PYTHON}" -m pytest_faultloop.jobs.workload.launcher >>"${LOG}" 2>&1
status=$?
log_msg "END main_workload (exit ${status})"
log_msg "END SBATCH"
# Optional contract marker: lets the loop see the end at once instead of at its next poll.
date +%s.%N > "${EXPERIMENT_DIR}/job_ended"
exit "${status}"
