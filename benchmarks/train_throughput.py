"""Training speed of the course GPT against Hugging Face's GPT2LMHeadModel of the same shape.

All models get the same shape (the ``shakespeare-char-cpu`` config unless overridden), the same
batches, the same AdamW settings (the trainer's ``make_optimizer``) and the same step (forward,
backward, gradient clipping, optimizer step). The peer runs twice: as GPT-2 ships
(``activation_function="gelu_new"``, written as a chain of elementwise ops) and with
``"gelu"``, the same function and kernel as the course model's default, so that what is left
is the course model's own engineering (its linear layers run their products in oneDNN, see
``mini_llm/cpu_linear.py`` and ``cpu_matmul.py``). They take turns in rounds, so load from
other processes hits all alike; the script prints the median ms/step of each and the ratios.

    .venv/bin/python benchmarks/train_throughput.py                 # eager
    .venv/bin/python benchmarks/train_throughput.py --compile       # both torch.compile'd
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from mini_llm import configs
from mini_llm.bench import train_step_times
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.train import make_optimizer


class HFWithLoss(torch.nn.Module):
    """GPT2LMHeadModel behind the course interface: forward(x, y) -> (logits, loss)."""

    def __init__(self, config: GPTConfig, activation_function: str):
        super().__init__()
        self.hf = GPT2LMHeadModel(GPT2Config(
            vocab_size=config.vocab_size, n_positions=config.block_size, n_embd=config.n_embd,
            n_layer=config.n_layer, n_head=config.n_head, resid_pdrop=config.dropout,
            embd_pdrop=config.dropout, attn_pdrop=config.dropout,
            activation_function=activation_function,
            bos_token_id=0, eos_token_id=0, attn_implementation="sdpa"))

    def forward(self, x, y):
        logits = self.hf(input_ids=x).logits
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="shakespeare-char-cpu")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    run = configs.resolve(args.config, args.overrides)
    config = GPTConfig(vocab_size=82, **run.model)  # 82 = characters of the Shakespeare corpus
    B, T = run.data["batch_size"], config.block_size
    torch.manual_seed(0)
    ours = GPT(config)
    models = {"mini_llm": ours,
              "transformers, gelu_new (GPT-2 default)": HFWithLoss(config, "gelu_new"),
              "transformers, gelu (same as mini_llm)": HFWithLoss(config, "gelu")}
    optimizers = {name: make_optimizer(model, run.train, torch.device("cpu"))
                  for name, model in models.items()}
    runners = {name: torch.compile(m) if args.compile else m for name, m in models.items()}
    batches = [(torch.randint(config.vocab_size, (B, T)),) * 2 for _ in range(args.steps)]
    batches = [(x, torch.roll(x, -1, dims=1)) for x, _ in batches]

    times = {name: [] for name in models}
    for round_ in range(args.rounds):
        for name, model in runners.items():
            warmup = 5 if round_ == 0 else 2
            times[name] += train_step_times(model, batches[:warmup] + batches, optimizers[name],
                                            warmup=warmup, grad_clip=run.train.grad_clip)
    median = {name: statistics.median(t) for name, t in times.items()}
    mode = "torch.compile" if args.compile else "eager"
    print(f"shape {args.config} {' '.join(args.overrides)}: batch {B}x{T}, "
          f"{ours.num_parameters():,} parameters, {mode}, {torch.get_num_threads()} threads, "
          f"{len(times['mini_llm'])} steps each")
    for name, value in median.items():
        ratio = ("" if name == "mini_llm"
                 else f"   mini_llm is {value / median['mini_llm']:.2f}x faster")
        print(f"  {name:40s} {value:7.2f} ms/step  {B * T / value * 1000:8,.0f} tokens/s{ratio}")


if __name__ == "__main__":
    main()
