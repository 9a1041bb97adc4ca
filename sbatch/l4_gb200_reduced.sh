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
# The shared logic is in gb200_common.sh (sourced below; see there for the hooks set here).
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

# ── The model: its name, size, environment and Megatron launch (hooks of gb200_common.sh) ──
GB200_SCRIPT_NAME=l4_gb200_reduced.sh
GB200_DEFAULT_NODES=2
gb200_model_env() {
    export TORCH_CPP_LOG_LEVEL=INFO
    export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=20
    # Checkpointing
    export USE_ASYNC_CKPT="${USE_ASYNC_CKPT:-0}"
    export CKPT_SAVE_INTERVAL="${CKPT_SAVE_INTERVAL:-100}"
    export DIST_TIMEOUT_AFTER_INIT="${DIST_TIMEOUT_AFTER_INIT:-1}"
}
GB200_MYENV_VARS=(USE_ASYNC_CKPT CKPT_SAVE_INTERVAL DIST_TIMEOUT_AFTER_INIT)
GB200_CHECKPOINT_MOUNTS=(/checkpoints)
# The per-node Megatron clone (one clone per host and job); expanded in the container.
# shellcheck disable=SC2016
GB200_MEGATRON_PATH='/shared_tmp/megatron_$(hostname)_${SLURM_JOB_ID}'
# Main workload (Megatron's pretrain_gpt; caches staged in and back by local rank 0; async checkpoints).
read -r -d '' GB200_WORKLOAD_PREPARE <<'WORKLOAD'
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
WORKLOAD
read -r -d '' GB200_WORKLOAD_EXEC <<'WORKLOAD'
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

# ── The shared part: sbatch/gb200_common.sh ──────────────────────────────────
# sbatch copies this script into slurmd's spool directory and runs the copy (as slurm_script), so
# the script's own directory is the repository's sbatch/ only when it runs in place (bash sbatch/...,
# DRY_RUN=1). Otherwise the file is found as scripts/user.env is: under FAULTLOOP_REPO, else under
# the submit directory (SLURM_SUBMIT_DIR: the repository root, where the loop runs sbatch; or its
# sbatch/), else beside the script that was submitted (its path as slurmctld recorded it).
# GB200_COMMON names the file outright.
if [[ -z "${GB200_COMMON:-}" ]]; then
    for GB200_DIR in "$(dirname "${BASH_SOURCE[0]}")" "${FAULTLOOP_REPO:+${FAULTLOOP_REPO}/sbatch}" \
        "${SLURM_SUBMIT_DIR:+${SLURM_SUBMIT_DIR}/sbatch}" "${SLURM_SUBMIT_DIR:-}"; do
        if [[ -n "${GB200_DIR}" && -f "${GB200_DIR}/gb200_common.sh" ]]; then
            GB200_COMMON="${GB200_DIR}/gb200_common.sh"
            break
        fi
    done
fi
if [[ -z "${GB200_COMMON:-}" && -n "${SLURM_JOB_ID:-}" ]] && command -v scontrol >/dev/null; then
    GB200_DIR=$(scontrol show job "${SLURM_JOB_ID}" 2>/dev/null | awk '/^ *Command=/ {sub(/^ *Command=/, ""); print $1}')
    GB200_COMMON="$(dirname "${GB200_DIR:-.}")/gb200_common.sh"
fi
if [[ ! -f "${GB200_COMMON:-}" ]]; then
    echo "l4_gb200_reduced.sh: gb200_common.sh not found (set FAULTLOOP_REPO to the repository)" >&2
    exit 2
fi
# shellcheck source=gb200_common.sh
source "${GB200_COMMON}"
