#!/usr/bin/env bash
# Every GPU-machine measurement of benchmarks/README.md in one call, each under its own time
# limit and most important first (about 5.5 minutes on an H200, 2026-11-30):
#   1. gpu_check.sh: the results file chapter 12 renders (commit it as book/results/);
#   2. train_throughput.py on the GPU, eager then compiled, against HF GPT-2;
#   3. train_throughput.py on the machine's CPU, emulated AVX2 then as it is (one thread);
#   4. mini-llm bench on the GPU.
#
#   GPU_CHECK_COMMIT=<commit> benchmarks/device_run.sh OUT_DIR [key=value ...]
#
# OUT_DIR receives gpu_check.json and one log per step; key=value arguments go to gpu_check.sh
# (a tiny shape makes a quick rehearsal on any machine; the GPU contests then fail on a CPU). Needs what gpu_check.sh needs, plus
# transformers for the contests; PYTHON (default python3) picks the interpreter.
set -uo pipefail
out=${1:?usage: benchmarks/device_run.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHON=${PYTHON:-python3}
contest=("$PYTHON" benchmarks/train_throughput.py)
avx2=(env ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2)

RESULTS="$out/gpu_check.json" timeout 330 benchmarks/gpu_check.sh "${@:2}" 2>&1 |
  tee "$out/gpu_check.log"
timeout 90 "${contest[@]}" --device cuda --config shakespeare-char-gpu --rounds 5 --steps 20 \
  2>&1 | tee "$out/contest_gpu_eager.log"
{
  timeout 60 "${avx2[@]}" "${contest[@]}" --rounds 6 --steps 6 --threads 1
  timeout 60 "${contest[@]}" --rounds 6 --steps 6 --threads 1
} 2>&1 | tee "$out/contest_cpu.log"
timeout 170 "${contest[@]}" --device cuda --config shakespeare-char-gpu --compile --rounds 3 \
  --steps 20 2>&1 | tee "$out/contest_gpu_compiled.log"
timeout 80 "$PYTHON" -m mini_llm.cli bench --config shakespeare-char-gpu --steps 20 \
  2>&1 | tee "$out/bench_gpu.log"
