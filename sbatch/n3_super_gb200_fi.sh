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
# The shared logic is in gb200_common.sh (sourced below; see there for the hooks set here).
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

# ── The model: its name, size, environment and Megatron launch (hooks of gb200_common.sh) ──
GB200_SCRIPT_NAME=n3_super_gb200_fi.sh
GB200_DEFAULT_NODES=8
gb200_model_env() {
    export QUANTIZATION_TYPE_DEBUG=1
    export USE_MNNVL=1
    export TORCH_CPP_LOG_LEVEL=WARNING
    export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=30
    # DeepEP (hybridep MoE routing; USE_DEEPEP=0 uses alltoall) and CUDA graphs
    export USE_DEEPEP="${USE_DEEPEP:-1}"
    if [[ "${USE_DEEPEP}" == "1" ]]; then
        export NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=32
    fi
    export ENABLE_CUDA_GRAPH="${ENABLE_CUDA_GRAPH:-1}"
}
GB200_MYENV_VARS=(ENABLE_CUDA_GRAPH USE_DEEPEP)
GB200_CHECKPOINT_MOUNTS=(/checkpoint-load /checkpoint-save)
# The per-node Megatron clone (one clone per node index, reused across jobs: removed first); expanded in the container.
# shellcheck disable=SC2016
GB200_MEGATRON_PATH='/shared_tmp/megatron_${SLURM_NODEID}'
GB200_SETUP_FRESH_CLONE=1
# Main workload (Megatron's pretrain_mamba; caches staged in for all local ranks by local rank 0).
read -r -d '' GB200_WORKLOAD_PREPARE <<'WORKLOAD'
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
WORKLOAD
read -r -d '' GB200_WORKLOAD_EXEC <<'WORKLOAD'
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
    echo "n3_super_gb200_fi.sh: gb200_common.sh not found (set FAULTLOOP_REPO to the repository)" >&2
    exit 2
fi
# shellcheck source=gb200_common.sh
source "${GB200_COMMON}"
