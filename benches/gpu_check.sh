#!/usr/bin/env bash
# The GPU check: one script that, on a machine with an NVIDIA GPU, shows in under 8
# minutes that the CUDA path works end to end, and prints one summary table.
#
#   benches/gpu_check.sh                 on a GPU machine (fails when CUDA is missing)
#   benches/gpu_check.sh --cpu-dry-run   every step on the CPU at toy sizes (CI, laptops)
#
# Steps: the CUDA-marked tests; SFT + RL of the tiny preset in bf16; 20 RL steps of a
# ~0.1B Qwen3 built locally (no download) in bf16 with gradient checkpointing and FSDP
# (torchrun, one GPU); TorchEngine tokens/s against transformers.generate; a short RL run
# with the in-process vLLM engine when vLLM is installed. Any failing step stops the
# script with a non-zero status; the table then shows which one failed.
#
# Environment: PYTHON (default: python), WORK (default: a fresh temporary directory).
set -euo pipefail

MODE=gpu
if [[ $# -gt 0 ]]; then
    case "$1" in
        --cpu-dry-run) MODE=cpu ;;
        *) echo "usage: $0 [--cpu-dry-run]" >&2; exit 2 ;;
    esac
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
PY="${PYTHON:-python}"
WORK="${WORK:-$(mktemp -d -t agentrl-gpu-check.XXXXXX)}"
SUMMARY="$WORK/summary.tsv"
mkdir -p "$WORK"
: > "$SUMMARY"
CURRENT=""
STARTED=0

print_table() {
    echo
    echo "== agentrl GPU check ($MODE) =="
    printf '%-22s %-7s %8s  %s\n' "step" "status" "seconds" "result"
    while IFS=$'\t' read -r name status secs detail; do
        printf '%-22s %-7s %8s  %s\n' "$name" "$status" "$secs" "$detail"
    done < "$SUMMARY"
    echo "(work directory: $WORK)"
}

on_exit() {
    local code=$?
    if [[ $code -ne 0 && -n "$CURRENT" ]]; then
        printf '%s\tFAILED\t%s\t%s\n' "$CURRENT" "$((SECONDS - STARTED))" \
            "exit status $code (see the output above)" >> "$SUMMARY"
    fi
    print_table
    exit $code
}
trap on_exit EXIT

# step NAME COMMAND...: run COMMAND; its last output line is the table's result column.
step() {
    CURRENT="$1"; shift
    STARTED=$SECONDS
    echo
    echo "-- $CURRENT: $*"
    local log="$WORK/$CURRENT.log"
    "$@" 2>&1 | tee "$log"
    local last
    last="$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-90)"
    printf '%s\tok\t%s\t%s\n' "$CURRENT" "$((SECONDS - STARTED))" "$last" >> "$SUMMARY"
    CURRENT=""
}

skip() {
    printf '%s\tskipped\t0\t%s\n' "$1" "$2" >> "$SUMMARY"
}

export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
TORCHRUN=("$PY" -m torch.distributed.run --standalone --nproc_per_node=1)
AGENTRL=("$PY" -m agentrl.cli)

if [[ $MODE == gpu ]]; then
    DEVICE=cuda; DTYPE=bfloat16; BACKEND=nccl; SIZE=100m
    SFT_STEPS=300; RL_STEPS=10; FSDP_STEPS=20; GEN=64
    SIZES=(--batch_size 4 --num_generations 8)
    step environment "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device';
print(torch.__version__, torch.cuda.get_device_name(0))"
    step cuda-tests "$PY" -m pytest "$ROOT/tests" -m cuda -q -p no:cacheprovider -rs
    if grep -q "SKIPPED" "$WORK/cuda-tests.log"; then
        echo "CUDA-marked tests were skipped on a GPU machine" >&2
        exit 1
    fi
else
    DEVICE=cpu; DTYPE=float32; BACKEND=gloo; SIZE=tiny
    SFT_STEPS=3; RL_STEPS=2; FSDP_STEPS=2; GEN=12
    SIZES=(--batch_size 2 --num_generations 2 --num_threads 1)
    export OMP_NUM_THREADS=1
    step environment "$PY" -c "import torch; print(torch.__version__, 'cpu dry run')"
    step cuda-tests "$PY" -m pytest "$ROOT/tests/training/test_memory.py" -m cuda -q \
        -p no:cacheprovider -rs
fi

RUN_OPTS=(--device "$DEVICE" --dtype "$DTYPE" --save_dir "$WORK" --eval_before_train 0
          --eval_interval 0 --report 0 --progress 0 --use_wandb 0 --max_gen_len "$GEN"
          "${SIZES[@]}")

SFT_DEMOS=()
[[ $MODE == cpu ]] && SFT_DEMOS=(--num_demos 24 --eval_tasks 4 --eval_interval 0
                                 --num_threads 1)
step tiny-sft "${AGENTRL[@]}" sft --output "$WORK/tiny-sft" --steps "$SFT_STEPS" \
    --device "$DEVICE" --dtype "$DTYPE" "${SFT_DEMOS[@]}"

step tiny-rl "${AGENTRL[@]}" train --model "$WORK/tiny-sft" --run_name tiny-rl \
    --total_steps "$RL_STEPS" --eval_samples 8 "${RUN_OPTS[@]}"
step tiny-rl-check "$PY" "$HERE/gpu_check.py" check-run --run-dir "$WORK/tiny-rl" \
    --steps "$RL_STEPS"

step build-model "$PY" "$HERE/gpu_check.py" build-model --out "$WORK/model-$SIZE" --size "$SIZE"
step fsdp-rl "${TORCHRUN[@]}" -m agentrl.cli train --model "$WORK/model-$SIZE" \
    --run_name fsdp-rl --multi_gpu_mode ddp --fsdp 1 --dist_backend "$BACKEND" \
    --gradient_checkpointing 1 --total_steps "$FSDP_STEPS" --eval_samples 8 \
    --save_interval 0 "${RUN_OPTS[@]}"
step fsdp-rl-check "$PY" "$HERE/gpu_check.py" check-run --run-dir "$WORK/fsdp-rl" \
    --steps "$FSDP_STEPS"
if [[ ! -f "$WORK/fsdp-rl/checkpoints/step-$(printf '%07d' "$FSDP_STEPS")/dcp/.metadata" ]]; then
    echo "the FSDP run wrote no sharded checkpoint" >&2
    exit 1
fi

step engine-vs-hf "$PY" "$HERE/gpu_check.py" engine-vs-hf --model "$WORK/model-$SIZE" \
    --device "$DEVICE"

if "$PY" -c "import vllm" 2>/dev/null && [[ $MODE == gpu ]]; then
    step vllm-rl "${AGENTRL[@]}" train --model "$WORK/tiny-sft" --run_name vllm-rl \
        --rollout_engine vllm --total_steps 4 --eval_samples 8 "${RUN_OPTS[@]}"
    step vllm-rl-check "$PY" "$HERE/gpu_check.py" check-run --run-dir "$WORK/vllm-rl" --steps 4
else
    skip vllm-rl "vLLM not installed (or CPU dry run)"
fi
