#!/bin/bash
# l4_gb200_reduced.sh - the seed's Llama4-Scout (reduced layers) fault-injection job on GB200,
# Megatron-LM in a container (pyxis). Template of the seed's job script; it cannot run on this
# machine. Check it with `bash -n` and `DRY_RUN=1 bash sbatch/l4_gb200_reduced.sh`, which prints
# the srun commands instead of running them.
#
# Contract (set by the submitter with sbatch --export=ALL,...): FAULT_TYPE FAULT_RANK
# FAULT_AT_ITER FAULT_DELAY EXPERIMENT_DIR BASE_EXPERIMENTS_DIR GPUS_PER_NODE. Site settings
# come from scripts/user.env (found under FAULTLOOP_REPO, else the submit directory). Outputs:
# logs/slurm/${SLURM_JOB_ID}.${SLURM_RESTART_COUNT}.1.main_workload.log, FR dumps under
# checkpoints/ (Megatron's --flight-recorder-dump-path), tensorboard/.
# Minimum size: 2 nodes.

#SBATCH --time=00:30:00
#SBATCH --job-name=llama4-scout-gb200
#SBATCH --output=/tmp/slurm-%j.launch.out
#SBATCH --error=/tmp/slurm-%j.launch.err
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --exclusive
#SBATCH --mem=0

DRY_RUN="${DRY_RUN:-0}"
FAULTLOOP_REPO="${FAULTLOOP_REPO:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}"
USER_ENV_FILE="${USER_ENV_FILE:-${FAULTLOOP_REPO}/scripts/user.env}"
if [[ -f "${USER_ENV_FILE}" ]]; then
    # shellcheck disable=SC1090
    source "${USER_ENV_FILE}"
fi
if [[ "${DRY_RUN}" == "1" ]]; then
    SLURM_JOB_ID="${SLURM_JOB_ID:-DRYRUN}"
    SLURM_NNODES="${SLURM_NNODES:-${NODES:-2}}"
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

# ── Platform / NCCL / PyTorch ────────────────────────────────────────────────
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
export TORCH_CPP_LOG_LEVEL=INFO
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000
export TORCH_NCCL_RETHROW_CUDA_ERRORS=0
export TORCH_NCCL_ENABLE_MONITORING=1
export TORCH_NCCL_DUMP_ON_TIMEOUT=1
export TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN=0
export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=20
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

# ── Checkpointing and caches ──────────────────────────────────────────────────
export USE_ASYNC_CKPT="${USE_ASYNC_CKPT:-0}"
export CKPT_SAVE_INTERVAL="${CKPT_SAVE_INTERVAL:-100}"
export DIST_TIMEOUT_AFTER_INIT="${DIST_TIMEOUT_AFTER_INIT:-1}"
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
MYENV_TEXT="# Generated by l4_gb200_reduced.sh for job ${SLURM_JOB_ID}.
export USE_ASYNC_CKPT=${USE_ASYNC_CKPT}
export CKPT_SAVE_INTERVAL=${CKPT_SAVE_INTERVAL}
export DIST_TIMEOUT_AFTER_INIT=${DIST_TIMEOUT_AFTER_INIT}
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
CONTAINER_MOUNTS+=",${EXPERIMENT_DIR}/checkpoints:/checkpoints"
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
read -r -d '' SETUP_SCRIPT <<'SETUP'
MEGATRON_PATH=/shared_tmp/megatron_$(hostname)_${SLURM_JOB_ID}
mkdir -p "${MEGATRON_PATH}" && cd "${MEGATRON_PATH}" || exit 1
CURRENT_BRANCH=$(git -C /megatron-lm_repo branch --show-current)
echo "Cloning Megatron branch ${CURRENT_BRANCH} to ${MEGATRON_PATH}"
git clone --single-branch --branch "${CURRENT_BRANCH}" /megatron-lm_repo .
rm -rf "${MEGATRON_PATH}/nvidia_resiliency_ext"
rsync -a "${NVRX_CONTAINER_SRC_PATH}/nvidia_resiliency_ext/" "${MEGATRON_PATH}/nvidia_resiliency_ext/"
SETUP
log_msg "START all_node_setup"
run srun --label "${CONTAINER_ARGS[@]}" --exclusive \
    --error="${LOG_FILE_BASE}.0.all_node_setup.log" --output="${LOG_FILE_BASE}.0.all_node_setup.log" \
    --ntasks-per-node=1 --ntasks="${SLURM_NNODES}" --kill-on-bad-exit=0 --mpi=none \
    bash -c "${SETUP_SCRIPT}"
log_msg "END all_node_setup"

# ── Main workload: one task per GPU, Megatron's pretrain_gpt with its fault injector ──
read -r -d '' WORKLOAD_SCRIPT <<'WORKLOAD'
source /shared_tmp/.myenv_${SLURM_JOB_ID}.sh
MEGATRON_PATH=/shared_tmp/megatron_$(hostname)_${SLURM_JOB_ID}
export PYTHONPATH=${MEGATRON_PATH}:${NVRX_REPO_ROOT}:${NVRX_SRC_ROOT}:${PYTHONPATH}
export TRITON_CACHE_DIR=/tmp/triton_${SLURM_LOCALID}
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_${SLURM_LOCALID}
mkdir -p "${TRITON_CACHE_DIR}" "${TORCHINDUCTOR_CACHE_DIR}"
if [[ "${ENABLE_NFS_CACHE_STAGING}" == "1" && "${SLURM_LOCALID}" == "0" ]]; then
    [[ -d "${NFS_TRITON_CACHE}" ]] && rsync -a --ignore-existing "${NFS_TRITON_CACHE}/" "${TRITON_CACHE_DIR}/"
    [[ -d "${NFS_INDUCTOR_CACHE}" ]] && rsync -a --ignore-existing "${NFS_INDUCTOR_CACHE}/" "${TORCHINDUCTOR_CACHE_DIR}/"
fi
stage_back() {
    if [[ "${ENABLE_NFS_CACHE_STAGING}" == "1" && "${SLURM_LOCALID}" == "0" ]]; then
        [[ -n "${NFS_TRITON_CACHE}" ]] && mkdir -p "${NFS_TRITON_CACHE}" && rsync -a --ignore-existing "${TRITON_CACHE_DIR}/" "${NFS_TRITON_CACHE}/"
        [[ -n "${NFS_INDUCTOR_CACHE}" ]] && mkdir -p "${NFS_INDUCTOR_CACHE}" && rsync -a --ignore-existing "${TORCHINDUCTOR_CACHE_DIR}/" "${NFS_INDUCTOR_CACHE}/"
    fi
}
trap stage_back EXIT

CKPT_SAVE_ARGS=()
if [[ "${USE_ASYNC_CKPT}" == "1" ]]; then
    CKPT_SAVE_ARGS=(--save /checkpoints --save-interval "${CKPT_SAVE_INTERVAL}" --async-save
        --use-persistent-ckpt-worker --use-dist-ckpt --ckpt-fully-parallel-save --ckpt-assume-constant-structure)
fi
FAULT_INJECTOR_ARGS=()
if [[ "${ENABLE_FAULT_INJECTION}" == "1" ]]; then
    FAULT_INJECTOR_ARGS=(--fault-injector-ranks "${FAULT_RANK}" --fault-injector-fault-types "${FAULT_TYPE}"
        --fault-injector-fault-delay "${FAULT_DELAY:-0}" --fault-injector-delay-start-iteration "${FAULT_AT_ITER}")
fi
cd "${MEGATRON_PATH}" || exit 1
exec python3 "${MEGATRON_PATH}/pretrain_gpt.py" \
    --exit-duration-in-mins 5750 --distributed-timeout-minutes 10 --disable-gloo-process-groups \
    --mock-data --data-cache-path /datacache --no-create-attention-mask-in-dataloader --no-mmap-bin-files \
    --tokenizer-type NullTokenizer --tiktoken-pattern v2 --vocab-size 238600 \
    --micro-batch-size 1 --global-batch-size 64 --train-samples 10240000 \
    --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-05 \
    --lr-decay-style cosine --lr-warmup-samples 1024000 --lr-decay-samples 20480000 \
    --lr 0.0003 --min-lr 2.9999999999999997e-05 --weight-decay 0.1 --clip-grad 1.0 --loss-scale 1.0 \
    --use-mcore-models --untie-embeddings-and-output-weights --disable-bias-linear \
    --attention-backend flash --transformer-impl transformer_engine \
    --position-embedding-type rope --rotary-base 500000 --rotary-interleaved \
    --use-rope-scaling --rope-scaling-factor 8.0 --no-rope-fusion --no-rope-freq 4 --use-flash-attn \
    --cross-entropy-fusion-impl te --cross-entropy-loss-fusion \
    --seq-length 8192 --max-position-embeddings 8192 --num-layers 12 --swiglu \
    --hidden-size 5120 --num-attention-heads 40 --group-query-attention --num-query-groups 8 \
    --ffn-hidden-size 16384 --kv-channels 128 --normalization RMSNorm \
    --attention-dropout 0.0 --hidden-dropout 0.0 --grad-reduce-in-bf16 --qk-l2-norm \
    --num-experts 16 --moe-layer-freq 1 --moe-ffn-hidden-size 8192 --moe-shared-expert-intermediate-size 8192 \
    --moe-router-topk 1 --moe-router-score-function sigmoid --moe-token-dispatcher-type alltoall \
    --moe-grouped-gemm --moe-shared-expert-overlap --moe-router-bias-update-rate 0.001 \
    --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 0.01 --moe-router-enable-expert-bias \
    --moe-apply-probs-on-input --moe-router-force-load-balancing \
    --bf16 --fp8-format hybrid --fp8-recipe delayed --fp8-param-gather \
    --fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-margin 0 \
    --te-rng-tracker --sequence-parallel --use-distributed-optimizer \
    --overlap-grad-reduce --overlap-param-gather --ddp-num-buckets 5 \
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 \
    --expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --ddp-average-in-collective \
    --log-interval 1 --timing-log-option minmax --log-params-norm --log-num-zeros-in-grad --log-throughput \
    --check-weight-hash-across-dp-replicas-interval 20000 --tensorboard-dir /tensorboard --logging-level 10 \
    --eval-iters 14 --eval-interval 2000 --manual-gc --manual-gc-interval 100 --num-workers 1 \
    --rerun-mode validate_results --log-straggler --disable-straggler-on-startup --straggler-minmax-count 16 \
    --local-rank "${SLURM_LOCALID}" --context-parallel-size 1 \
    "${FAULT_INJECTOR_ARGS[@]}" \
    --distributed-timeout-seconds-after-init "${DIST_TIMEOUT_AFTER_INIT}" \
    --flight-recorder-dump-path /checkpoints \
    "${CKPT_SAVE_ARGS[@]}"
WORKLOAD
log_msg "START main_workload"
run srun --label "${CONTAINER_ARGS[@]}" \
    --error="${LOG_FILE_BASE}.1.main_workload.log" --output="${LOG_FILE_BASE}.1.main_workload.log" \
    --ntasks-per-node="${GPUS_PER_NODE}" --ntasks="${TOTAL_TASKS}" --kill-on-bad-exit=0 --mpi=none \
    bash -c "${WORKLOAD_SCRIPT}"
log_msg "END main_workload"
log_msg "END SBATCH"
