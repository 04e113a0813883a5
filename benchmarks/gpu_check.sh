#!/usr/bin/env bash
# A short GPU check (a few minutes on one modern GPU): train the shakespeare-char-gpu config with
# bf16 autocast and torch.compile for a fixed number of steps, then print tokens/s, an MFU
# estimate, the validation loss and peak memory.
#
#   benchmarks/gpu_check.sh                      # on a GPU: 1500 steps of the full config
#   benchmarks/gpu_check.sh device=cpu n_layer=1 n_head=2 n_embd=32 block_size=32 \
#       batch_size=4 max_iters=20 eval_iters=2 compile=false    # the CPU smoke test
#
# Extra key=value arguments override the config (same keys as `mini-llm train`); device=… picks
# the device (the --device flag of `mini-llm train`).
# PEAK_TFLOPS sets the GPU's dense bf16 peak for MFU when the script does not know the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-runs/gpu-check}
rm -rf "$OUT"
"$PYTHON" - "$OUT" max_iters=1500 eval_interval=500 "$@" <<'PY'
import json, os, resource, statistics, sys, time
from dataclasses import replace
from pathlib import Path

import torch

from mini_llm import configs
from mini_llm.bench import gpt_flops_per_token
from mini_llm.cli import default_data_dir
from mini_llm.corpus import load_text
from mini_llm.data import RandomBatches, load_meta, load_split, prepare
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.train import train

out, overrides = sys.argv[1], sys.argv[2:]
device_choice = "auto"  # like `mini-llm train --device`: a flag there, not a config key
for override in [o for o in overrides if o.startswith("device=")]:
    device_choice = override.split("=", 1)[1]
    overrides.remove(override)
run = configs.resolve("shakespeare-char-gpu", overrides)
data = default_data_dir(run.data["corpus"])
if not (data / "meta.json").exists():
    prepare(load_text(run.data["corpus"]), data, run.data["val_fraction"])
config = GPTConfig(vocab_size=load_meta(data)["vocab_size"], **run.model)
torch.manual_seed(0)
model = GPT(config)
shape = {"block_size": config.block_size, "batch_size": run.data["batch_size"]}
start = time.perf_counter()
result = train(model, RandomBatches(load_split(data, "train"), seed=0, **shape),
               replace(run.train, out_dir=out, progress=False, device=device_choice),
               val_batches=RandomBatches(load_split(data, "val"), seed=1, **shape))
wall = time.perf_counter() - start

device = next(model.parameters()).device
rates = [r["tokens_per_s"] for r in map(json.loads, Path(out, "metrics.jsonl").open())
         if "tokens_per_s" in r]
tokens_per_s = statistics.median(rates[len(rates) // 4:])  # skip warm-up and compilation
peaks = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}
name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
peak = float(os.environ.get("PEAK_TFLOPS", 0)) * 1e12 or next(
    (value for key, value in peaks.items() if key in name), 0.0)
mfu = tokens_per_s * gpt_flops_per_token(config) / peak if peak else None
memory = (torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda"
          else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
print(f"device          {name} ({device}); bf16 autocast {device.type == 'cuda'}, "
      f"compile {run.train.compile}")
print(f"model           {model.num_parameters():,} parameters, {run.train.max_iters} steps of "
      f"{run.data['batch_size']}x{config.block_size} tokens, {wall:.0f} s wall")
print(f"tokens/s        {tokens_per_s:,.0f} (median of logged intervals)")
unknown = "n/a (peak FLOP/s unknown: set PEAK_TFLOPS)"
print(f"MFU             {unknown if mfu is None else f'{mfu:.1%}'}")
print(f"val loss        {result.val_losses[-1][1]:.4f} at step {result.step}")
kind = "GPU allocated" if device.type == "cuda" else "process RSS"
print(f"peak memory     {memory:.2f} GiB ({kind})")
PY
