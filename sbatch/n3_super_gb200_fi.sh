#!/bin/bash
# n3_super_gb200_fi.sh - the seed's Nemotron3-Super (hybrid Mamba MoE) fault-injection job on
# GB200, Megatron-LM in a container (pyxis). Template of the seed's job script; it cannot run on this
# machine. Check it with `bash -n` and `DRY_RUN=1 bash sbatch/n3_super_gb200_fi.sh`, which prints
# the srun commands instead of running them.
#
# Contract (set by the submitter with sbatch --export=ALL,...): FAULT_TYPE FAULT_RANK
# FAULT_AT_ITER FAULT_DELAY EXPERIMENT_DIR BASE_EXPERIMENTS_DIR GPUS_PER_NODE. Site settings
# come from scripts/user.env (found under FAULTLOOP_REPO, else the submit directory). Outputs:
# logs/slurm/${SLURM_JOB_ID}.${SLURM_RESTART_COUNT}.1.main_workload.log, FR dumps under
# checkpoints/ (Megatron's --flight-recorder-dump-path), tensorboard/.
# Minimum size: 8 nodes.

#SBATCH --time=00:30:00
#SBATCH --job-name=n3-super-gb200-fi
#SBATCH --output=/tmp/slurm-%j.launch.out
#SBATCH --error=/tmp/slurm-%j.launch.err
#SBATCH --nodes=8
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
    SLURM_NNODES="${SLURM_NNODES:-${NODES:-8}}"
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
export QUANTIZATION_TYPE_DEBUG=1
export USE_MNNVL=1
export NVTE_BWD_LAYERNORM_SM_MARGIN=16
export NCCL_P2P_NET_CHUNKSIZE=2097152
export NCCL_DEBUG=WARN
export PYTHONUNBUFFERED=1
export ONE_LOGGER_JOB_CATEGORY=test
export LOGLEVEL=DEBUG
export TORCHINDUCTOR_WORKER_START=fork
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export TORCH_CPP_LOG_LEVEL=WARNING
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000
export TORCH_NCCL_RETHROW_CUDA_ERRORS=0
export TORCH_NCCL_ENABLE_MONITORING=1
export TORCH_NCCL_DUMP_ON_TIMEOUT=1
export TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN=0
export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=30
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

# ── DeepEP (hybridep MoE routing; USE_DEEPEP=0 uses alltoall) and CUDA graphs ──
export USE_DEEPEP="${USE_DEEPEP:-1}"
if [[ "${USE_DEEPEP}" == "1" ]]; then
    export NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=32
fi
export ENABLE_CUDA_GRAPH="${ENABLE_CUDA_GRAPH:-1}"

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
MYENV_TEXT="# Generated by n3_super_gb200_fi.sh for job ${SLURM_JOB_ID}.
export ENABLE_CUDA_GRAPH=${ENABLE_CUDA_GRAPH}
export USE_DEEPEP=${USE_DEEPEP}
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
CONTAINER_MOUNTS+=",${EXPERIMENT_DIR}/checkpoints:/checkpoint-load,${EXPERIMENT_DIR}/checkpoints:/checkpoint-save"
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
MEGATRON_PATH=/shared_tmp/megatron_${SLURM_NODEID}
rm -rf "${MEGATRON_PATH}"
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

# ── Main workload: one task per GPU, Megatron's pretrain_mamba with its fault injector ──
read -r -d '' WORKLOAD_SCRIPT <<'WORKLOAD'
source /shared_tmp/.myenv_${SLURM_JOB_ID}.sh
MEGATRON_PATH=/shared_tmp/megatron_${SLURM_NODEID}
export PYTHONPATH=${MEGATRON_PATH}:${NVRX_REPO_ROOT}:${NVRX_SRC_ROOT}:${PYTHONPATH}
export TRITON_CACHE_DIR=/tmp/triton_${SLURM_LOCALID}
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_${SLURM_LOCALID}
TRITON_READY=/tmp/.triton_ready_${SLURM_JOB_ID}
if [[ "${ENABLE_NFS_CACHE_STAGING}" == "1" && "${SLURM_LOCALID}" == "0" ]]; then
    for r in 0 1 2 3; do
        mkdir -p /tmp/triton_${r} /tmp/inductor_${r}
        [[ -d "${NFS_TRITON_CACHE}" ]] && rsync -a --ignore-existing "${NFS_TRITON_CACHE}/" "/tmp/triton_${r}/"
        [[ -d "${NFS_INDUCTOR_CACHE}" ]] && rsync -a --ignore-existing "${NFS_INDUCTOR_CACHE}/" "/tmp/inductor_${r}/"
    done
    touch "${TRITON_READY}"
elif [[ "${ENABLE_NFS_CACHE_STAGING}" == "1" ]]; then
    until [[ -f "${TRITON_READY}" ]]; do sleep 1; done
fi
mkdir -p "${TRITON_CACHE_DIR}" "${TORCHINDUCTOR_CACHE_DIR}"

CUDA_GRAPH_ARGS=()
if [[ "${ENABLE_CUDA_GRAPH}" == "1" ]]; then
    CUDA_GRAPH_ARGS=(--enable-cuda-graph --cuda-graph-scope mamba attn)
fi
if [[ "${USE_DEEPEP:-1}" == "1" ]]; then
    MOE_DISPATCHER_ARGS=(--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32)
else
    MOE_DISPATCHER_ARGS=(--moe-token-dispatcher-type alltoall)
fi
FAULT_INJECTOR_ARGS=()
if [[ "${ENABLE_FAULT_INJECTION}" == "1" ]]; then
    FAULT_INJECTOR_ARGS=(--fault-injector-ranks "${FAULT_RANK}" --fault-injector-fault-types "${FAULT_TYPE}"
        --fault-injector-fault-delay "${FAULT_DELAY:-0}" --fault-injector-delay-start-iteration "${FAULT_AT_ITER}")
fi
cd "${MEGATRON_PATH}" || exit 1
exec python3 "${MEGATRON_PATH}/pretrain_mamba.py" \
    --exit-duration-in-mins 5750 --exit-interval 100 --distributed-timeout-minutes 10 --disable-gloo-process-groups \
    --mock-data --data-cache-path /datacache --no-create-attention-mask-in-dataloader --no-mmap-bin-files \
    --tokenizer-type NullTokenizer --tiktoken-pattern v2 --vocab-size 128000 \
    --micro-batch-size 1 --global-batch-size 32 --train-samples 12207031 \
    --adam-beta1 0.9 --adam-beta2 0.95 --lr 4.5e-4 --min-lr 4.5e-6 \
    --lr-decay-style WSD --lr-warmup-samples 24414063 --lr-decay-samples 3048706055 \
    --lr-wsd-decay-style minus_sqrt --lr-wsd-decay-samples 610351563 \
    --weight-decay 0.1 --clip-grad 1.0 --override-opt_param-scheduler \
    --use-mcore-models --spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec --is-hybrid-model \
    --mamba-num-heads 128 --num-layers 88 --hidden-size 4096 --ffn-hidden-size 2688 \
    --num-attention-heads 32 --group-query-attention --num-query-groups 2 --kv-channels 128 \
    --hybrid-override-pattern MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME \
    --position-embedding-type none --normalization RMSNorm --untie-embeddings-and-output-weights \
    --init-method-std 0.014 --disable-bias-linear --squared-relu --use-fused-weighted-squared-relu \
    --seq-length 8192 --max-position-embeddings 8192 \
    --num-experts 512 --moe-router-topk 22 --moe-router-topk-scaling-factor 5.0 \
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32 \
    --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4 \
    "${MOE_DISPATCHER_ARGS[@]}" \
    --moe-grouped-gemm --moe-permute-fusion --moe-latent-size 1024 --moe-shared-expert-intermediate-size 5376 \
    --calculate-per-token-loss --bf16 --first-last-layers-bf16 \
    --num-layers-at-start-in-bf16 0 --num-layers-at-end-in-bf16 14 --fp4-format e2m1 --fp4-recipe nvfp4 \
    --attention-dropout 0.0 --hidden-dropout 0.0 --sequence-parallel --use-distributed-optimizer \
    --overlap-grad-reduce --overlap-param-gather --ddp-num-buckets 10 --ddp-pad-buckets-for-high-nccl-busbw \
    --high-priority-stream-groups ep --tensor-model-parallel-size 4 --pipeline-model-parallel-size 1 \
    --expert-model-parallel-size 32 --expert-tensor-parallel-size 1 \
    --cross-entropy-loss-fusion --cross-entropy-fusion-impl native --attention-backend flash \
    "${CUDA_GRAPH_ARGS[@]}" \
    --te-rng-tracker --manual-gc --manual-gc-interval 10 --num-workers 1 \
    --eval-interval 1000 --eval-iters 14 --log-interval 1 --log-params-norm --log-num-zeros-in-grad \
    --log-timers-to-tensorboard --log-memory-to-tensorboard --log-throughput --log-progress --log-energy \
    --log-memory-interval 500 --logging-level 20 --timing-log-option minmax \
    --check-weight-hash-across-dp-replicas-interval 20000 --tensorboard-dir /tensorboard \
    --local-rank "${SLURM_LOCALID}" --distributed-timeout-seconds-after-init 1 \
    --flight-recorder-dump-path /checkpoint-save \
    "${FAULT_INJECTOR_ARGS[@]}"
WORKLOAD
log_msg "START main_workload"
run srun --label "${CONTAINER_ARGS[@]}" \
    --error="${LOG_FILE_BASE}.1.main_workload.log" --output="${LOG_FILE_BASE}.1.main_workload.log" \
    --ntasks-per-node="${GPUS_PER_NODE}" --ntasks="${TOTAL_TASKS}" --kill-on-bad-exit=0 --mpi=none \
    bash -c "${WORKLOAD_SCRIPT}"
log_msg "END main_workload"
log_msg "END SBATCH"
