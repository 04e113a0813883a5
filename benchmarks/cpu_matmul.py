"""Linear layers of the course GPT: mini_llm's oneDNN-backed Linear against ``torch.nn.Linear``.

For each linear layer of the ``shakespeare-char-cpu`` GPT (batch 12 x 64 = 768 rows), times the
forward pass and the backward pass (gradients of input, weight and bias) of both layers on the
same inputs, in alternating rounds, and prints median microseconds, GFLOP/s and the ratio. The
last line is a large square product, where each library shows its peak. mini_llm's layer is
forced onto its oneDNN path here, whatever this process decided (printed first): this is the
measurement behind that decision, layer by layer.

With ``--products`` it times each of a layer's three products on its own instead (forward,
input gradient, weight gradient), MKL as ``nn.Linear``'s autograd calls it against oneDNN as
mini_llm's layer calls it: whether a decision per product or per shape could gain where the
whole layer does not.

    .venv/bin/python benchmarks/cpu_matmul.py --threads 1
    .venv/bin/python benchmarks/cpu_matmul.py --threads 1 --products
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mini_llm.engine import cpu_linear
from mini_llm.engine.cpu_linear import Linear

ROWS = 12 * 64
LAYERS = {  # name: (in features, out features)
    "attention q,k,v": (128, 384),
    "attention output": (128, 128),
    "MLP up": (128, 512),
    "MLP down": (512, 128),
    "output head": (128, 82),
}


def step_seconds(layer: torch.nn.Module, x: torch.Tensor, upstream: torch.Tensor) -> float:
    start = time.perf_counter()
    layer(x).backward(upstream)
    return time.perf_counter() - start


def compare(rows: int, n_in: int, n_out: int, repeats: int) -> tuple[float, float]:
    """Median seconds of forward + backward for nn.Linear and for mini_llm's Linear."""
    torch.manual_seed(0)
    ours = Linear(n_in, n_out)
    plain = torch.nn.Linear(n_in, n_out)
    plain.load_state_dict(ours.state_dict())
    x = torch.randn(rows, n_in, requires_grad=True)
    upstream = torch.randn(rows, n_out)
    times = {plain: [], ours: []}
    for turn in range(5 + repeats):  # 5 warm-up turns: allocator, oneDNN's kernel cache
        for layer, samples in times.items():
            with cpu_linear.forced(layer is ours and cpu_linear.onednn_available()):
                seconds = step_seconds(layer, x, upstream)
            if turn >= 5:
                samples.append(seconds)
    return statistics.median(times[plain]), statistics.median(times[ours])


def fastest_turns(contenders: dict, repeats: int) -> dict:
    """Fastest seconds of each zero-argument callable, taking turns (a busy machine only adds)."""
    times = {name: [] for name in contenders}
    for turn in range(5 + repeats):
        for name, run in contenders.items():
            start = time.perf_counter()
            run()
            if turn >= 5:
                times[name].append(time.perf_counter() - start)
    return {name: min(samples) for name, samples in times.items()}


def compare_products(rows: int, n_in: int, n_out: int, repeats: int) -> dict:
    """Seconds of each product of one layer: {product: (MKL, oneDNN)}."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(rows, n_in), torch.randn(n_out, n_in), torch.randn(n_out)
    grad_y = torch.randn(rows, n_out)
    seconds = fastest_turns(
        {
            ("forward", "MKL"): lambda: torch.addmm(bias, x, weight.t()),
            ("forward", "oneDNN"): lambda: cpu_linear.onednn_matmul(x, weight, bias),
            ("input gradient", "MKL"): lambda: grad_y.mm(weight),
            ("input gradient", "oneDNN"): lambda: cpu_linear.onednn_matmul(
                grad_y, weight.t(), None
            ),
            ("weight gradient", "MKL"): lambda: grad_y.t().mm(x),
            ("weight gradient", "oneDNN"): lambda: cpu_linear._weight_gradient(grad_y, x),
        },
        repeats,
    )
    products = ("forward", "input gradient", "weight gradient")
    return {p: (seconds[(p, "MKL")], seconds[(p, "oneDNN")]) for p in products}


def print_products(repeats: int):
    print(f"  {'layer':18s} {'shape':>14s}  MKL / oneDNN, fastest of {repeats} (ratio: MKL time")
    print(f"  {'':18s} {'':>14s}  over oneDNN's; above 1 oneDNN is faster)")
    for name, (n_in, n_out) in LAYERS.items():
        products = compare_products(ROWS, n_in, n_out, repeats)
        cells = [
            f"{product} {mkl * 1e6:4.0f}/{onednn * 1e6:4.0f} us {mkl / onednn:4.2f}x"
            for product, (mkl, onednn) in products.items()
        ]
        print(f"  {name:18s} {f'{ROWS}x{n_in}->{n_out}':>14s}  " + "; ".join(cells))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--products", action="store_true", help="each product on its own")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"capability {torch.backends.cpu.get_cpu_capability()}; {cpu_linear.decision()}")
    if args.products:
        if not cpu_linear.onednn_available():
            raise SystemExit("no oneDNN linear on this CPU/PyTorch build: nothing to compare")
        print_products(args.repeats)
        return
    print(
        f"oneDNN available: {cpu_linear.onednn_available()}; {torch.get_num_threads()} threads; "
        "forward + backward, median of",
        args.repeats,
    )
    print(f"  {'layer':18s} {'shape':>16s} {'nn.Linear':>20s} {'mini_llm Linear':>20s}  ratio")
    shapes = [(name, ROWS, *shape) for name, shape in LAYERS.items()]
    shapes.append(("square 1024", 1024, 1024, 1024))
    for name, rows, n_in, n_out in shapes:
        plain, ours = compare(rows, n_in, n_out, args.repeats if rows == ROWS else 20)
        flops = 3 * 2 * rows * n_in * n_out  # three products of rows x n_in x n_out
        print(
            f"  {name:18s} {f'{rows}x{n_in}->{n_out}':>16s} "
            f"{plain * 1e6:8.0f} us {flops / plain / 1e9:5.0f} GF/s "
            f"{ours * 1e6:8.0f} us {flops / ours / 1e9:5.0f} GF/s  {plain / ours:5.2f}x"
        )


if __name__ == "__main__":
    main()
