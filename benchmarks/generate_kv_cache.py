"""Generation speed with and without the KV cache, at 128, 256 and 512 new tokens.

Without the cache, every new token re-runs the model over the whole sequence so far (cost grows
with its length); with it, each token is one position of work. The model has the
``shakespeare-char-cpu`` shape with a context of 1024 (``block_size`` override) so that 512 new
tokens fit without cropping and the comparison measures the cache, not the window. Greedy
decoding; both ways give the same tokens (checked here too).

    .venv/bin/python benchmarks/generate_kv_cache.py
"""

from __future__ import annotations

import argparse

import torch

from mini_llm.engine import configs
from mini_llm.engine.bench import generation_tokens_per_s
from mini_llm.gpt import GPT, GPTConfig


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="shakespeare-char-cpu")
    parser.add_argument("overrides", nargs="*", metavar="key=value", default=["block_size=1024"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    run = configs.resolve(args.config, args.overrides)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=82, **run.model)).eval()
    prompt = torch.randint(82, (1, 16))
    print(
        f"shape {args.config} {' '.join(args.overrides)}: {model.num_parameters():,} parameters, "
        f"prompt 16 tokens, greedy, batch 1, {torch.get_num_threads()} threads, "
        f"median of {args.repeats}"
    )
    for new_tokens in args.lengths:
        cached = model.generate(prompt, new_tokens, temperature=0, use_cache=True)
        uncached = model.generate(prompt, new_tokens, temperature=0, use_cache=False)
        assert torch.equal(cached, uncached), "the cache changed the tokens"
        with_cache = generation_tokens_per_s(model, prompt, new_tokens, True, args.repeats)
        without = generation_tokens_per_s(model, prompt, new_tokens, False, args.repeats)
        print(
            f"  {new_tokens:4d} new tokens: {with_cache:8,.0f} tokens/s with cache, "
            f"{without:8,.0f} without   ratio {with_cache / without:5.2f}x"
        )


if __name__ == "__main__":
    main()
