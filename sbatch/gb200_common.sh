# shellcheck shell=bash
# gb200_common.sh - what the GB200 Megatron job scripts (l4_gb200_reduced.sh, n3_super_gb200_fi.sh)
# share: site settings, DRY_RUN, the platform/NCCL/PyTorch environment, fault injection, paths,
# the container's env file, disk cleanup, the per-node Megatron clone and the main srun.
#
# Not a job script: a job script sources it at top level (so scripts/user.env is sourced at top
# level too), after setting these hooks:
#   GB200_SCRIPT_NAME         its own name (slurmd runs a copy named slurm_script, so not $0)
#   GB200_DEFAULT_NODES       SLURM_NNODES under DRY_RUN=1 when neither it nor NODES is set
#   gb200_model_env           function, run after the shared environment: the model's exports
#   GB200_MYENV_VARS          array: the model's variables for the container's env file
#   GB200_CHECKPOINT_MOUNTS   array: container paths that ${EXPERIMENT_DIR}/checkpoints mounts on
#   GB200_MEGATRON_PATH       the per-node Megatron clone's path, expanded in the container
#   GB200_SETUP_FRESH_CLONE   1: remove a clone left there first (a path not unique to the job)
#   GB200_WORKLOAD_PREPARE    workload lines after the cache variables (caches, model arg arrays)
#   GB200_WORKLOAD_EXEC       the workload's last lines (exec python3 ...), run in MEGATRON_PATH
# How a job script finds this file under sbatch: see the comment above its `source` line.

DRY_RUN="${DRY_RUN:-0}"
FAULTLOOP_REPO="${FAULTLOOP_REPO:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}"
USER_ENV_FILE="${USER_ENV_FILE:-${FAULTLOOP_REPO}/scripts/user.env}"
if [[ -f "${USER_ENV_FILE}" ]]; then
    # shellcheck disable=SC1090
    source "${USER_ENV_FILE}"
fi
if [[ "${DRY_RUN}" == "1" ]]; then
    SLURM_JOB_ID="${SLURM_JOB_ID:-DRYRUN}"
    SLURM_NNODES="${SLURM_NNODES:-${NODES:-${GB200_DEFAULT_NODES}}}"
    SLURM_JOB_NODELIST="${SLURM_JOB_NODELIST:-dry-run-nodes}"
fi

log_msg() {
    local now
    now=$(date +%s)
    echo ">>> $1 ${now} ($(date -d "@${now}" '+%Y-%m-%d %H:%M:%S.%3N'))"
}

# Runs a command, or prints it (shell-quoted) under DRY_RUN=1.
run() {
    if [[ "${DRY_RUN}" == "1" ]]; then
        printf '%q ' "$@"
        echo
    else
        "$@"
    fi
}

log_msg "START SBATCH"
echo "Running on nodes: ${SLURM_JOB_NODELIST}"

# ── Platform / NCCL / PyTorch (gb200_model_env adds the model's own) ──────────
export NCCL_IB_DISABLE=0
export NCCL_NET_GDR_LEVEL=3
export PYXIS_LOG_LEVEL=debug
export NCCL_IB_SL=1
export NCCL_IB_TIMEOUT=19
export UB_TIMEOUT=720
export CUDA_DEVICE_MAX_CONNECTIONS=1
export NVTE_FWD_LAYERNORM_SM_MARGIN=16
export NVTE_BWD_LAYERNORM_SM_MARGIN=16
export NCCL_P2P_NET_CHUNKSIZE=2097152
export NCCL_DEBUG=WARN
export PYTHONUNBUFFERED=1
export ONE_LOGGER_JOB_CATEGORY=test
export LOGLEVEL=DEBUG
export TORCHINDUCTOR_WORKER_START=fork
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000
export TORCH_NCCL_RETHROW_CUDA_ERRORS=0
export TORCH_NCCL_ENABLE_MONITORING=1
export TORCH_NCCL_DUMP_ON_TIMEOUT=1
export TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN=0
export TORCH_DIST_INIT_BARRIER=0
export TORCH_INCLUDE_STACK_TRACE=0
export TORCH_INCLUDE_ONLY_ACTIVE=1
export TORCH_NCCL_EXTRA_DUMP_ON_EXEC=1

# ── Fault injection (Megatron's injector: the delay starts after FAULT_AT_ITER) ──
export FAULT_AT_ITER="${FAULT_AT_ITER:-5}"
export FAULT_DELAY="${FAULT_DELAY:-15}"
export FAULT_RANK="${FAULT_RANK:-1}"
export FAULT_TYPE="${FAULT_TYPE:-}"
export ENABLE_FAULT_INJECTION="${ENABLE_FAULT_INJECTION:-$([[ -n "${FAULT_TYPE}" ]] && echo 1 || echo 0)}"

# ── The model's environment (its platform settings and knobs: sets GB200_MYENV_VARS' values) ──
gb200_model_env

# ── Caches ────────────────────────────────────────────────────────────────────
export ENABLE_NFS_CACHE_STAGING="${ENABLE_NFS_CACHE_STAGING:-0}"
export NFS_TRITON_CACHE="${NFS_TRITON_CACHE:-}"
export NFS_INDUCTOR_CACHE="${NFS_INDUCTOR_CACHE:-}"
export CONTAINER_CLEANUP_CMD="${CONTAINER_CLEANUP_CMD:-}"

# ── Geometry and paths ────────────────────────────────────────────────────────
export GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
TOTAL_TASKS=$((SLURM_NNODES * GPUS_PER_NODE))
export BASE_EXPERIMENTS_DIR="${BASE_EXPERIMENTS_DIR:-${HOME}/nvrx-attr-experiments}"
export EXPERIMENT_DIR="${EXPERIMENT_DIR:-${BASE_EXPERIMENTS_DIR}/fault_injection/manual/n${SLURM_NNODES}_${FAULT_TYPE:-NONE}_r${FAULT_RANK}_i${FAULT_AT_ITER}}"
export NVRX_CONTAINER_REPO_PATH="${NVRX_CONTAINER_REPO_PATH:-${HOME}/nvidia-resiliency-ext}"
export NVRX_CONTAINER_SRC_PATH="${NVRX_CONTAINER_SRC_PATH:-${NVRX_CONTAINER_REPO_PATH}/src}"
export SHARED_TMP_BASE_DIR="${SHARED_TMP_BASE_DIR:-${HOME}/tmp}"
export MEGATRON_REPO_HOST_PATH="${MEGATRON_REPO_HOST_PATH:-${HOME}/megatron-lm-main}"
export WORKSPACE_HOST_PATH="${WORKSPACE_HOST_PATH:-${HOME}/tmp}"
export CONTAINER_IMAGE="${CONTAINER_IMAGE:-nvcr.io/nvidia/nemo:26.04}"
export CONTAINER_NAME="${CONTAINER_NAME:-}"
export CONTAINER_WORKDIR="${CONTAINER_WORKDIR:-/}"
: "${SLURM_RESTART_COUNT:=0}"

LOG_DIR="${EXPERIMENT_DIR}/logs"
LOG_FILE_BASE="${LOG_DIR}/slurm/${SLURM_JOB_ID}.${SLURM_RESTART_COUNT}"
SHARED_TMP_HOST="${SHARED_TMP_BASE_DIR}/${SLURM_JOB_ID}"
MYENV_FILE="${SHARED_TMP_HOST}/.myenv_${SLURM_JOB_ID}.sh"
echo "Writing logs to ${LOG_DIR}"
run mkdir -p "${BASE_EXPERIMENTS_DIR}/datacache" "${EXPERIMENT_DIR}/tensorboard" \
    "${EXPERIMENT_DIR}/checkpoints" "${LOG_DIR}/slurm" "${SHARED_TMP_HOST}"

# Pyxis forwards sbatch --export variables unreliably: the container sources this file instead.
MYENV_TEXT="# Generated by ${GB200_SCRIPT_NAME} for job ${SLURM_JOB_ID}."
for GB200_VAR in "${GB200_MYENV_VARS[@]}"; do
    MYENV_TEXT+=$'\n'"export ${GB200_VAR}=${!GB200_VAR}"
done
MYENV_TEXT+="
export FAULT_AT_ITER=${FAULT_AT_ITER}
export FAULT_DELAY=${FAULT_DELAY}
export FAULT_RANK=${FAULT_RANK}
export FAULT_TYPE=${FAULT_TYPE}
export ENABLE_FAULT_INJECTION=${ENABLE_FAULT_INJECTION}
export ENABLE_NFS_CACHE_STAGING=${ENABLE_NFS_CACHE_STAGING}
export NFS_TRITON_CACHE=${NFS_TRITON_CACHE}
export NFS_INDUCTOR_CACHE=${NFS_INDUCTOR_CACHE}
export NVRX_REPO_ROOT=${NVRX_CONTAINER_REPO_PATH}
export NVRX_SRC_ROOT=${NVRX_CONTAINER_SRC_PATH}
export PYTHONPATH=\${NVRX_REPO_ROOT}:\${NVRX_SRC_ROOT}:\${PYTHONPATH}"
if [[ "${DRY_RUN}" == "1" ]]; then
    printf '# would write %s:\n%s\n' "${MYENV_FILE}" "${MYENV_TEXT}"
else
    printf '%s\n' "${MYENV_TEXT}" > "${MYENV_FILE}"
fi

CONTAINER_MOUNTS="/home:/home,${SHARED_TMP_HOST}:/shared_tmp,${EXPERIMENT_DIR}/logs:/logs"
CONTAINER_MOUNTS+=",${MEGATRON_REPO_HOST_PATH}:/megatron-lm_repo,${BASE_EXPERIMENTS_DIR}/datacache:/datacache"
CONTAINER_MOUNTS+=",${EXPERIMENT_DIR}/tensorboard:/tensorboard,${WORKSPACE_HOST_PATH}:/workspace"
for GB200_MOUNT in "${GB200_CHECKPOINT_MOUNTS[@]}"; do
    CONTAINER_MOUNTS+=",${EXPERIMENT_DIR}/checkpoints:${GB200_MOUNT}"
done
CONTAINER_ARGS=(
    --container-mounts "${CONTAINER_MOUNTS}"
    --container-image "${CONTAINER_IMAGE}"
    --container-workdir "${CONTAINER_WORKDIR}"
)
if [[ -n "${CONTAINER_NAME}" ]]; then
    CONTAINER_ARGS+=(--container-name "${CONTAINER_NAME}")
fi

if [[ -n "${CONTAINER_CLEANUP_CMD}" ]]; then
    log_msg "START disk_cleanup"
    run srun --label --ntasks-per-node=1 --ntasks="${SLURM_NNODES}" --kill-on-bad-exit=0 --mpi=none \
        bash -lc "${CONTAINER_CLEANUP_CMD}"
    log_msg "END disk_cleanup"
else
    log_msg "SKIP disk_cleanup"
fi

# ── All-node setup: a per-node clone of Megatron with this nvrx checkout inside ──
SETUP_SCRIPT="MEGATRON_PATH=${GB200_MEGATRON_PATH}"
if [[ "${GB200_SETUP_FRESH_CLONE:-0}" == "1" ]]; then
    # shellcheck disable=SC2016  # expanded in the container
    SETUP_SCRIPT+=$'\n''rm -rf "${MEGATRON_PATH}"'
fi
read -r -d '' SETUP_CLONE <<'SETUP'
mkdir -p "${MEGATRON_PATH}" && cd "${MEGATRON_PATH}" || exit 1
CURRENT_BRANCH=$(git -C /megatron-lm_repo branch --show-current)
echo "Cloning Megatron branch ${CURRENT_BRANCH} to ${MEGATRON_PATH}"
git clone --single-branch --branch "${CURRENT_BRANCH}" /megatron-lm_repo .
rm -rf "${MEGATRON_PATH}/nvidia_resiliency_ext"
rsync -a "${NVRX_CONTAINER_SRC_PATH}/nvidia_resiliency_ext/" "${MEGATRON_PATH}/nvidia_resiliency_ext/"
SETUP
SETUP_SCRIPT+=$'\n'"${SETUP_CLONE}"
log_msg "START all_node_setup"
run srun --label "${CONTAINER_ARGS[@]}" --exclusive \
    --error="${LOG_FILE_BASE}.0.all_node_setup.log" --output="${LOG_FILE_BASE}.0.all_node_setup.log" \
    --ntasks-per-node=1 --ntasks="${SLURM_NNODES}" --kill-on-bad-exit=0 --mpi=none \
    bash -c "${SETUP_SCRIPT}"
log_msg "END all_node_setup"

# ── Main workload: one task per GPU, the model's Megatron entry point with its fault injector ──
read -r -d '' WORKLOAD_ENV <<'WORKLOAD'
export PYTHONPATH=${MEGATRON_PATH}:${NVRX_REPO_ROOT}:${NVRX_SRC_ROOT}:${PYTHONPATH}
export TRITON_CACHE_DIR=/tmp/triton_${SLURM_LOCALID}
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_${SLURM_LOCALID}
WORKLOAD
read -r -d '' WORKLOAD_FAULT_INJECTOR <<'WORKLOAD'
FAULT_INJECTOR_ARGS=()
if [[ "${ENABLE_FAULT_INJECTION}" == "1" ]]; then
    FAULT_INJECTOR_ARGS=(--fault-injector-ranks "${FAULT_RANK}" --fault-injector-fault-types "${FAULT_TYPE}"
        --fault-injector-fault-delay "${FAULT_DELAY:-0}" --fault-injector-delay-start-iteration "${FAULT_AT_ITER}")
fi
cd "${MEGATRON_PATH}" || exit 1
WORKLOAD
# shellcheck disable=SC2016  # expanded by the task's bash in the container
WORKLOAD_SCRIPT='source /shared_tmp/.myenv_${SLURM_JOB_ID}.sh'
WORKLOAD_SCRIPT+="
MEGATRON_PATH=${GB200_MEGATRON_PATH}
${WORKLOAD_ENV}
${GB200_WORKLOAD_PREPARE}
${WORKLOAD_FAULT_INJECTOR}
${GB200_WORKLOAD_EXEC}"
log_msg "START main_workload"
run srun --label "${CONTAINER_ARGS[@]}" \
    --error="${LOG_FILE_BASE}.1.main_workload.log" --output="${LOG_FILE_BASE}.1.main_workload.log" \
    --ntasks-per-node="${GPUS_PER_NODE}" --ntasks="${TOTAL_TASKS}" --kill-on-bad-exit=0 --mpi=none \
    bash -c "${WORKLOAD_SCRIPT}"
log_msg "END main_workload"
log_msg "END SBATCH"
