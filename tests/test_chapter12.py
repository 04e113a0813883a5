"""Chapter 12's rendered page: every number its prose states is a glued value shown on the page,
every comparison the prose makes holds for those values, and the GPU section shows a GPU run
only from the committed results file."""

from __future__ import annotations

import functools
import inspect
import math
import re

import numpy as np
import pytest
from _book_helpers import (
    BOOK_DIR,
    glued_fixture,
    html_tables,
    html_text,
    page_fixture,
    shown,
)
from booklib.gpu_results import step_mfu, summary_sentence, timing_spread

from mini_llm.corpus import load_text
from mini_llm.engine import configs
from mini_llm.engine.data import prepare
from mini_llm.engine.results import read_gpu_results
from mini_llm.flops import gpt_flops_per_token, mfu
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.scaling import fit_power_law
from mini_llm.tokenizer import CharTokenizer

PAGE = "ch12_gpu_training"


@functools.cache
def vocab() -> int:
    """The vocabulary of every model on the page: the distinct characters of Shakespeare."""
    return CharTokenizer.from_text(load_text("shakespeare")).vocab_size


page = page_fixture(PAGE)
glued = glued_fixture(PAGE, in_prose=False)


def test_flops_table_and_the_share_of_attention(page, glued):
    raw, text = page
    assert shown(page, glued, "ch12_vocab_size") == vocab()  # "the distinct characters"
    table = next(rows for rows in html_tables(raw) if rows and rows[0][0] == "config")
    shares = {row[0]: row[-1] for row in table[1:]}
    gpu = GPTConfig(vocab_size=vocab(), **configs.resolve("shakespeare-char-gpu").model)
    attention = 12 * gpu.n_layer * gpu.block_size * gpu.n_embd
    share = shown(page, glued, "ch12_attention_share_gpu", ".1%")
    assert share == pytest.approx(attention / gpt_flops_per_token(gpu))
    assert shares["shakespeare-char-gpu"] == f"{share:.1%}"
    assert float(shares["shakespeare-char-cpu"].rstrip("%")) / 100 < share  # grows with T
    # N is every parameter but the position embedding; its vectors are "too few to matter"
    n = gpu.parameter_count() - gpu.block_size * gpu.n_embd
    assert {row[0]: row[1] for row in table[1:]}["shakespeare-char-gpu"] == f"{n:,}"
    vectors = sum(p.numel() for p in GPT(gpu).parameters() if p.dim() == 1)
    assert shown(page, glued, "ch12_vector_share_gpu", ".1%") == pytest.approx(vectors / n)
    assert vectors / n < 0.01
    assert re.search(r"Table 12\.\d+\s+Training FLOPs per token", text)  # numbered, captioned


def test_profile_and_mfu(page, glued):
    matmul = shown(page, glued, "ch12_matmul_share", ".0%")
    assert shown(page, glued, "ch12_op_calls", ",") > 0  # "the profiler records N calls"
    top = shown(page, glued, "ch12_top_kind")
    kinds = re.findall(r"^(\S[^\n]*?)\s+[\d.]+ ms\s+([\d.]+)%$", page[1], flags=re.MULTILINE)
    assert kinds, "the profile's printed table is missing"
    shares = {kind.strip(): float(pct) / 100 for kind, pct in kinds}
    assert max(shares, key=shares.get) == top  # "the largest kind is ..."
    assert shares["matrix multiply"] == pytest.approx(matmul, abs=1e-3)
    assert sum(shares.values()) == pytest.approx(1, abs=0.01)
    cpu_mfu = shown(page, glued, "ch12_cpu_mfu", ".0%")
    assert 0 < cpu_mfu < 1  # "the rest goes to the small things"
    assert shown(page, glued, "ch12_cpu_peak_gflops", ".1f") > 0
    # the prose's shape of the peak product is the one the output beside it ran
    rows, width = map(int, re.search(r"a (\d+)x(\d+) by \2x\2 product", page[1]).groups())
    assert f"one large product, {rows:,} rows of activations times a {width} \u00d7 {width}" in (
        " ".join(page[1].split())
    )


def test_the_profile_puts_each_operator_in_its_own_kind(glued):
    """The grouping of the profile: a LayerNorm's backward is not the optimizer's, a product
    under another library's name is a product, the clipping's norms are the optimizer's."""
    kinds = glued["ch12_kind_of_operator"]
    expected = [  # (fragment, kind), the first fragment found in a name decides
        ("attention", "attention"),
        ("layer_norm", "norms and activations"),
        ("layernorm", "norms and activations"),
        ("gelu", "norms and activations"),
        ("softmax", "norms and activations"),
        ("matmul", "matrix multiply"),
        ("linear", "matrix multiply"),
        ("adam", "optimizer and clipping"),
        ("_foreach_norm", "optimizer and clipping"),
        ("vector_norm", "optimizer and clipping"),
    ]
    for name, kind in kinds.items():
        right = next((k for fragment, k in expected if fragment in name.lower()), None)
        assert right in (None, kind), f"{name} is grouped as {kind!r}, not {right!r}"
    assert any("layer_norm_backward" in name for name in kinds)  # the case that went wrong
    assert any("adam" in name.lower() for name in kinds)


def test_accumulation_resume_and_ddp_give_the_same_update(page, glued):
    assert shown(page, glued, "ch12_accum_gap", ".1e") < 1e-5  # float32 rounding
    assert shown(page, glued, "ch12_split_gap", ".1e") < 1e-5  # rows split across two cores
    for name in ("ch12_split_ms", "ch12_whole_ms"):  # both times stated, from this build
        assert shown(page, glued, name, ".1f") > 0
    assert "batch rows split across 2 cores: one thread each" in page[1]  # the split was made
    assert shown(page, glued, "ch12_resume_gap", ".1e") == 0  # "continued exactly"
    assert shown(page, glued, "ch12_ddp_gap", ".1e") < 1e-5
    assert glued["ch12_ddp_ranks_equal"] is True
    raw, text = page
    assert "the two processes' weights are bit for bit equal: True" in text
    # the refusal to resume with another number of processes is shown, with its reason
    assert re.search(r"written by 2 process\(es\) and this run has 1", text)
    # the diagram of a data-parallel step is referred to where the several-GPU run is taught
    assert re.search(r"Fig\. 12\.\d+ draws one step of such a run", text)
    # data parallelism was run as two CPU processes, never on GPUs: the body and the summary
    # both say so, and the summary claims no GPU run of it
    summary = raw.split('<section id="summary">', 1)[1].split('<section id="further', 1)[0]
    summary = " ".join(html_text(summary).split())
    assert "checked data parallelism with two CPU processes only, not on GPUs" in summary
    assert "has never run them on several GPUs" in " ".join(text.split())


def test_precision_and_compilation_were_measured_here(page, glued):
    # the data sheets' dense rates: bf16 about twice TF32, far more than plain float32
    over_tf32 = shown(page, glued, "ch12_bf16_over_tf32", ".0f")
    over_fp32 = shown(page, glued, "ch12_bf16_over_fp32", ".0f")
    assert over_tf32 == pytest.approx(2, abs=0.05) and over_fp32 > 10
    results = read_gpu_results(BOOK_DIR / "results" / "gpu_check.json")
    if results is not None and "H200" in results["hardware"]["name"]:
        assert results["peak_flops"] / 1e12 == pytest.approx(1979 / 2, rel=1e-3)
    _, text = page
    assert "BF16 tensor cores 989.5 TFLOP/s dense" in " ".join(text.split())
    assert shown(page, glued, "ch12_bf16_ratio", ".2f") > 0
    # "only ...: the roundings largely cancel": the gap is far below a single rounding of the
    # loss itself to 8 significant bits (the untrained model's loss, about ln V, times 2**-9)
    loss_gap = shown(page, glued, "ch12_bf16_loss_gap", ".1e")
    assert loss_gap < math.log(glued["ch12_vocab_size"]) * 2**-9 / 10
    assert "the roundings largely cancel" in " ".join(text.split())
    assert shown(page, glued, "ch12_compile_s", ".1f") > 0
    assert shown(page, glued, "ch12_compile_ratio", ".2f") > 0


def test_explicit_attention_memory_grows_quadratically_and_fused_linearly(page, glued):
    explicit = shown(page, glued, "ch12_attn_growth_explicit", ".1f")
    fused = shown(page, glued, "ch12_attn_growth_fused", ".1f")
    assert 2.5 < explicit <= 4.2  # "on its way to the 4-fold of a T² term"
    assert fused == pytest.approx(2, abs=0.2)  # "linearly"
    assert shown(page, glued, "ch12_attn_memory_ratio", ".1f") > 2
    # "the time mixes two savings": the explicit layer is the slower one at T = 1024
    assert shown(page, glued, "ch12_attn_time_ratio", ".1f") > 1
    flat = " ".join(page[1].split())
    # both savings are named (PyTorch's fused kernel skips the key blocks above the diagonal),
    # and the page does not claim the measurement separates them
    assert "weights to memory and reads them back" in flat
    assert "skips the blocks of scores that lie wholly above the diagonal" in flat
    assert "this measurement does not tell the two savings apart" in flat
    assert "still computes every one of" not in flat and "not arithmetic" not in flat


def test_checkpointing_saves_memory_for_the_same_gradients(page, glued):
    assert shown(page, glued, "ch12_ckpt_saved", ".0%") > 0.5
    assert glued["ch12_ckpt_same"] is True
    assert shown(page, glued, "ch12_ckpt_time_ratio", ".2f") > 0


def test_scaling_sweep_fit_and_its_claims(page, glued):
    _, text = page
    rows = re.findall(
        r"n_embd\s+(\d+):\s+([\d,]+) non-embedding parameters,\s+val loss ([\d.]+)", text
    )
    assert [int(width) for width, _, _ in rows] == [16, 32, 48, 64, 96]
    sizes = np.array([int(size.replace(",", "")) for _, size, _ in rows])
    losses = np.array([float(loss) for _, _, loss in rows])
    for (width, _, _), size in zip(rows, sizes, strict=True):  # the count is the model's
        d = int(width)
        assert (
            size
            == GPTConfig(
                vocab_size=vocab(), block_size=32, n_layer=2, n_head=2, n_embd=d
            ).parameter_count()
            - (vocab() + 32) * d
        )
    assert np.all(np.diff(losses) < 0)  # the loss falls as the model grows
    alpha = shown(page, glued, "ch12_alpha", ".2f")
    shown(page, glued, "ch12_alpha_se", ".2f")
    shown(page, glued, "ch12_floor", ".2f")
    shown(page, glued, "ch12_floor_se", ".2f")
    # the printed losses (3 decimals) fitted again give the page's exponent
    assert fit_power_law(sizes, losses).alpha == pytest.approx(alpha, abs=0.02)
    spread = shown(page, glued, "ch12_seed_spread", ".3f")
    gap = shown(page, glued, "ch12_smallest_gap", ".3f")
    assert spread < gap  # "the order of the sizes is not chance"
    assert gap == pytest.approx(min(np.abs(np.diff(losses))), abs=2e-3)
    tokens = shown(page, glued, "ch12_sweep_tokens", ",")
    assert tokens == 200 * 16 * 32
    # "the first 90 % of the text ... validated on the last 10 %": the page's cut, which is
    # the course's (mini_llm.engine.data.prepare)
    train_pct, val_pct = glued["ch12_train_pct"], glued["ch12_val_pct"]
    assert train_pct + val_pct == pytest.approx(100)
    val_fraction = inspect.signature(prepare).parameters["val_fraction"].default
    assert val_pct == pytest.approx(100 * val_fraction, abs=0.1)
    flat = " ".join(page[1].split())
    assert f"batches of the first {train_pct:.0f} % of the text" in flat
    assert f"validated on the last {val_pct:.0f} %, which no run trains on" in flat
    ratio = shown(page, glued, "ch12_max_tokens_per_param", ".1f")
    assert ratio == pytest.approx(tokens / sizes.min())
    fewest = shown(page, glued, "ch12_min_tokens_per_param", ".1f")
    assert fewest == pytest.approx(tokens / sizes.max())
    chinchilla = shown(page, glued, "ch12_chinchilla_ratio", ".0f")
    assert fewest < ratio < chinchilla  # "all fewer than the compute-optimal ratio"
    first = shown(page, glued, "ch12_budget_first", ".2f")
    last = shown(page, glued, "ch12_budget_last", ".2f")
    assert last < first  # "more data would lower it"
    assert shown(page, glued, "ch12_budget_growth") == 8
    # every budget warms up over the same share of its own steps (not a fixed count)
    share = shown(page, glued, "ch12_warmup_share", ".0%")
    budgets = re.findall(
        r"([\d,]+) tokens \(\s*(\d+) steps,\s*(\d+) of warm-up\): val loss ([\d.]+)", text
    )
    assert [int(steps) for _, steps, _, _ in budgets] == [25, 50, 100, 200]
    for tokens_seen, steps, warmup, _ in budgets:
        assert int(warmup) == max(1, int(int(steps) * share))
        assert int(tokens_seen.replace(",", "")) == int(steps) * 16 * 32
    assert float(budgets[0][3]) == pytest.approx(first, abs=5e-3)
    assert float(budgets[-1][3]) == pytest.approx(last, abs=5e-3)
    assert shown(page, glued, "ch12_gopher_ratio", ".0f") == 4  # "the 4 times larger Gopher"
    # C is the floor of this budget: the recorded GPU run, trained far longer, goes past it
    note = shown(page, glued, "ch12_floor_note")
    results = read_gpu_results(BOOK_DIR / "results" / "gpu_check.json")
    if results is not None:
        run = results["train"]
        gpu_loss = run["val_losses"][-1][1]
        side = "below" if gpu_loss < glued["ch12_floor"] else "above"
        assert f"validation loss of {gpu_loss:.3f} on the same text, {side} this fitted C" in note
        gpu_tokens = run["steps"] * run["batch_size"] * run["block_size"]
        assert f"{gpu_tokens / tokens:,.0f} times as many tokens" in note


def test_gpu_section_shows_only_the_committed_results_file(page, glued):
    _, text = page
    results = read_gpu_results(BOOK_DIR / "results" / "gpu_check.json")
    assert glued["ch12_gpu_recorded"] is (results is not None)
    if results is None:
        assert "No GPU run is recorded." in text
        return
    hardware, run = results["hardware"], results["train"]
    assert hardware["name"] in text and results["commit"] in text
    assert f"{run['tokens_per_s']:,.0f}" in text
    assert f"{run['mfu']:.1%} of {results['peak_flops'] / 1e12:.0f} TFLOP/s" in text
    rows = {(row["what"], row["setting"]): row for row in results["ablations"]}
    eager, compiled = rows[("compile", "off")], rows[("compile", "on")]
    graphs = rows[("compile", "on, CUDA graphs")]
    # the table says which MFU is over the wall clock and which is the training step's alone
    raw, _ = page
    table = dict(
        row[:2]
        for rows_ in html_tables(raw)
        if rows_ and rows_[0][0] == "measured"
        for row in rows_
    )
    assert table["MFU, wall clock"].startswith(f"{run['mfu']:.1%} of ")
    alone = step_mfu(results, compiled)
    assert alone == pytest.approx(
        mfu(
            run["batch_size"] * run["block_size"] / (compiled["ms_per_step"] / 1000),
            run["flops_per_token"],
            results["peak_flops"],
        )
    )
    assert table["MFU, compiled training step alone"].startswith(f"{alone:.1%} ")
    assert alone > run["mfu"]  # the wall clock holds compilation and evaluation too
    assert table["tokens/s, wall clock"] == f"{run['tokens_per_s']:,.0f}"
    assert "short run: eager, bf16, timed again" in table  # the repeat is marked as one
    assert re.search(r"Table 12\.\d+\s+The recorded GPU run", text)
    assert f"The run used PyTorch {hardware['torch']}" in text
    # the spread of the same step timed twice, and which effects stand out of it
    low, high = timing_spread(results)
    assert f"{low:.1f} and {high:.1f} ms, {high / low - 1:.0%} apart" in text
    for name, row in (("compilation's", compiled), ("CUDA graphs'", graphs)):
        ratio = eager["ms_per_step"] / row["ms_per_step"]
        verdict = "within" if ratio < high / low else "beyond"
        assert f"{name} {ratio:.2f}× over eager is {verdict} it" in text.replace("\u2019", "'")
    assert glued["ch12_gpu_summary"] == summary_sentence(results)
    shown(page, glued, "ch12_gpu_summary")
    busy = eager["gpu_busy_ms_per_step"]
    assert (
        f"takes {eager['ms_per_step']:.1f} ms, yet the GPU runs kernels for only {busy:.1f}" in text
    )
    assert busy < eager["ms_per_step"]  # "the GPU finishes each kernel sooner than ... the next"
    assert compiled["ms_per_step"] < eager["ms_per_step"] and "the step falls to" in text
    speedup = eager["ms_per_step"] / graphs["ms_per_step"]
    assert speedup > 1 and f"{speedup:.1f} times as fast as eager" in text
    explicit, fused = (
        next(r for r in results["attention"] if r["block_size"] == 2048 and r["attention"] == k)
        for k in ("explicit", "fused")
    )
    assert explicit["peak_memory_gib"] > fused["peak_memory_gib"]
    assert f"needs {explicit['peak_memory_gib']:.2f} GiB at its peak against" in text
    assert re.search(r"Fig\. 12\.\d+\s+The recorded GPU run, drawn from", text)  # numbered
