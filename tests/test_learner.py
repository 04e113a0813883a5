"""The learner's own mini_llm: export, swap into the package, check against the reference, train.

The solved notebooks (``solutions/``) must train exactly like the reference; one known bug must
be named by ``learner check`` and change training; unsolved parts fall back to the reference;
bad input is a clear error that loses nothing; students' exports run only in the sandbox.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from _exercise_helpers import ASSIGNMENTS, EXERCISES, SOLUTIONS, cell_by_grade_id, grader_meta
from nbformat.v4 import new_code_cell, new_notebook
from torch import nn

from mini_llm import generate, self_attention, transformer
from mini_llm.cli import load_model
from mini_llm.engine import schedule
from mini_llm.engine.checkpoint import load_checkpoint
from mini_llm.engine.train import TrainConfig
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.grading import limits
from mini_llm.learner import LearnerError, adapters, export, probe, using
from mini_llm.learner.cli import LEARNER_MODEL
from mini_llm.learner.registry import PARTS, parts_of
from mini_llm.learner.swap import Swapped

REFERENCE_TOLERANCE = 1e-5  # the bound on |learner - reference| loss, solved notebooks
NO_SCALE = " / q.shape[-1] ** 0.5"  # the √d_k of the solution's scaled_dot_product_attention
STEPS = ["max_iters=6", "eval_iters=2", "log_interval=1", "progress=false"]


def cli(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-m", "mini_llm.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **(env or {})},
    )


def copy_course(root: Path, assignments=ASSIGNMENTS, source: Path = SOLUTIONS) -> Path:
    for name in assignments:
        shutil.copytree(source / name, root / name)
    return root


def notebook(root: Path, assignment: str) -> Path:
    return root / assignment / f"{assignment}.ipynb"


def edit_cell(root: Path, assignment: str, grade_id: str, change) -> None:
    """Rewrite one answer cell of the notebook in ``root`` with ``change(source)``."""
    path = notebook(root, assignment)
    nb = nbformat.read(path, as_version=4)
    cell = cell_by_grade_id(nb, grade_id)
    cell.source = change(cell.source)
    nbformat.write(nb, path)


def write_notebook(root: Path, assignment: str, cells: dict[str, str]) -> None:
    """A notebook of answer cells (grade_id -> source), as a chapter still being written."""
    nb = new_notebook()
    for grade_id, source in cells.items():
        nb.cells.append(
            new_code_cell(source, metadata={"nbgrader": {"grade_id": grade_id, "solution": True}})
        )
    notebook(root, assignment).parent.mkdir(parents=True)
    nbformat.write(nb, notebook(root, assignment))


def without_scale(source: str) -> str:
    assert NO_SCALE in source
    return source.replace(NO_SCALE, "")


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("learner") / "solved"
    export(SOLUTIONS, out)
    return out


@pytest.fixture(scope="module")
def buggy(tmp_path_factory) -> Path:
    """The solutions with one known bug: attention without the √d_k scale."""
    root = copy_course(tmp_path_factory.mktemp("buggy") / "notebooks")
    edit_cell(root, "ch08_self_attention", "scaled_dot_product_attention_impl", without_scale)
    export(root, root.parent / "package")
    return root.parent / "package"


# --------------------------------------------------------------------------- the registry
def test_the_registry_has_every_answer_cell_of_the_course_and_each_reference_fits():
    for assignment in ASSIGNMENTS:
        nb = nbformat.read(notebook(SOLUTIONS, assignment), as_version=4)
        answers = [
            meta["grade_id"]
            for meta in map(grader_meta, nb.cells)
            if meta.get("grade_id", "").endswith("_impl")
        ]
        assert answers == [part.grade_id for part in parts_of(assignment)], assignment
    for part in PARTS:
        reference = adapters.resolve(part.reference)
        if part.assignment in ASSIGNMENTS:
            assert reference is not None, part.reference
        if reference is None and part.stand_in is None:
            continue  # a chapter being written: its notebook and reference come together
        reference = reference or adapters.by_name(part.stand_in)
        solution = _solution_signature(part)
        if solution is not None:
            assert list(inspect.signature(reference).parameters) == solution, part.label


def _solution_signature(part) -> list[str] | None:
    path = notebook(SOLUTIONS, part.assignment)
    if not path.exists():
        return None
    source = cell_by_grade_id(nbformat.read(path, as_version=4), part.grade_id).source
    found = [
        node
        for node in ast.parse(source).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == part.name
    ]
    if isinstance(found[0], ast.ClassDef):
        found = [n for n in found[0].body if getattr(n, "name", "") == "__init__"]
        return [a.arg for a in found[0].args.args[1:] + found[0].args.kwonlyargs]
    return [a.arg for a in found[0].args.args + found[0].args.kwonlyargs]


# ------------------------------------------------------------------------------ export
def test_export_writes_one_module_per_chapter_and_the_status_of_every_part(solved):
    manifest = json.loads((solved / "manifest.json").read_text())
    status = {(p["assignment"], p["name"]): p["status"] for p in manifest["parts"]}
    assert len(status) == len(PARTS)
    for part in PARTS:
        expected = "present" if part.assignment in ASSIGNMENTS else "missing"
        assert status[(part.assignment, part.name)] == expected, part.label
    modules = sorted(p.name for p in solved.glob("*.py") if p.name != "__init__.py")
    assert modules == sorted(f"{a}.py" for a in ASSIGNMENTS)
    module = (solved / "ch01_bigrams.py").read_text()
    assert "load_corpus(" not in module  # the setup cell's imports only, not its data loading
    assert "from mini_llm.corpus import load_corpus" in module


def test_a_released_exercise_set_is_all_missing_and_the_package_stays_the_reference(tmp_path):
    parts = export(EXERCISES, tmp_path / "package")
    assert {p.status for p in parts} == {"missing"}
    before = self_attention.scaled_dot_product_attention
    with using(tmp_path / "package", verbose=False) as swapped:
        assert swapped.learners == []
        assert self_attention.scaled_dot_product_attention is before
        assert set(swapped.parts.values()) == {"missing"}


def test_checking_an_unsolved_set_says_nothing_was_compared(tmp_path):
    """An export of the untouched release has nothing to compare: check must not claim that
    everything agrees with the reference."""
    export(EXERCISES, tmp_path / "package")
    checked = cli("learner", "check", str(tmp_path / "package"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "agree" not in checked.stdout
    assert checked.stdout.splitlines()[-1].startswith("nothing compared: no part is written")
    not_a_package = cli("learner", "check", str(EXERCISES), cwd=tmp_path)
    assert not_a_package.returncode == 2
    assert "learner export my_exercises --out DIR" in not_a_package.stderr
    assert "into it again" not in not_a_package.stderr  # export refuses such a folder


def test_a_partly_solved_set_uses_the_solved_parts_and_lists_the_rest(tmp_path, capsys):
    root = copy_course(tmp_path / "notebooks", ["ch08_self_attention"])
    copy_course(root, ["ch09_transformer"], source=EXERCISES)  # chapter 9 not started
    edit_cell(  # one part of chapter 8 not started either
        root, "ch08_self_attention", "split_heads_impl", lambda s: _stub("split_heads", s)
    )
    export(root, tmp_path / "package")
    originals = self_attention.scaled_dot_product_attention, transformer.layer_norm, nn.LayerNorm
    with using(tmp_path / "package") as swapped:
        assert swapped.learners == [
            "ch08_self_attention.scaled_dot_product_attention",
            "ch08_self_attention.causal_mask",
            "ch08_self_attention.sinusoidal_positional_encoding",
        ]
        assert swapped.parts["ch08_self_attention.split_heads"] == "missing"
        assert swapped.parts["ch09_transformer.layer_norm"] == "missing"
        assert self_attention.scaled_dot_product_attention.__module__.startswith("mini_llm_learner")
        assert (transformer.layer_norm, nn.LayerNorm) == originals[1:]
        model = GPT(GPTConfig(vocab_size=11, n_layer=1, n_embd=16, n_head=2, **LEARNER_MODEL))
        model(torch.zeros(1, 5, dtype=torch.long))  # runs on the mix
    assert (self_attention.scaled_dot_product_attention, transformer.layer_norm) == originals[:2]
    said = capsys.readouterr().out
    assert f"3 of {len(PARTS)} are yours" in said
    assert "ch09_transformer" in said and "reference (missing): layer_norm" in said


def _stub(name: str, source: str) -> str:
    header = source.split("### BEGIN SOLUTION")[0]
    assert f"def {name}(" in header
    return header.rstrip() + "\n    raise NotImplementedError()\n"


# ------------------------------------------------------ the learner's parts are really used
WRONG = {  # a wrong answer for each part the GPT calls: its output must change
    ("ch08_self_attention", "scaled_dot_product_attention"): without_scale,
    ("ch08_self_attention", "causal_mask"): lambda s: s.replace(".tril()", ".triu()"),
    ("ch08_self_attention", "split_heads"): lambda s: s.replace(
        ".transpose(-3, -2)", ".reshape(*batch, n_heads, T, d // n_heads)"
    ),
    ("ch09_transformer", "layer_norm"): lambda s: s.replace("variance + eps", "variance + 1.0"),
    ("ch09_transformer", "feed_forward"): lambda s: s.replace("torch.relu(", "torch.tanh("),
}


@pytest.mark.parametrize(("assignment", "name"), list(WRONG))
def test_the_gpt_calls_each_of_the_learners_functions(tmp_path, assignment, name):
    root = copy_course(tmp_path / "notebooks", ["ch08_self_attention", "ch09_transformer"])
    export(root, tmp_path / "right")
    edit_cell(root, assignment, f"{name}_impl", lambda s: _changed(WRONG[assignment, name], s))
    export(root, tmp_path / "wrong")

    def model():
        """The same GPT each time, its layers built from the parts swapped in now."""
        torch.manual_seed(0)
        built = GPT(GPTConfig(vocab_size=11, n_layer=2, n_embd=16, n_head=2, **LEARNER_MODEL))
        with torch.no_grad():  # sharper attention than at initialisation: its parts matter
            for block in built.blocks:
                block.attn.qkv.weight *= 20
        return built

    idx = torch.randint(11, (2, 7), generator=torch.Generator().manual_seed(1))
    reference = model()(idx)[0]
    with using(tmp_path / "right", verbose=False):
        assert (model()(idx)[0] - reference).abs().max() <= 1e-6
    with using(tmp_path / "wrong", verbose=False):
        assert (model()(idx)[0] - reference).abs().max() > 1e-2
    assert torch.equal(model()(idx)[0], reference)  # restored


def _changed(change, source: str) -> str:
    changed = change(source)
    assert changed != source
    return changed


def test_chapters_being_written_plug_in_the_sampler_and_the_schedule(tmp_path):
    """Notebooks of chapters 11 and 12 (written elsewhere) are used once they exist: the
    sampler's next_token and the training loop's schedule (through its adapter)."""
    root = tmp_path / "notebooks"
    write_notebook(
        root,
        "ch11_gpt",
        {
            "next_token_impl": "import torch\n\n"
            "def next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):\n"
            "    return torch.full((logits.size(0), 1), 3, dtype=torch.long)\n"
        },
    )
    write_notebook(
        root,
        "ch12_gpu_training",
        {
            "learning_rate_at_impl": "def learning_rate_at(step, max_lr, min_lr, warmup_iters, "
            "decay_iters):\n    return 0.5 * max_lr if step >= warmup_iters else min_lr\n"
        },
    )
    export(root, tmp_path / "package")
    model = GPT(GPTConfig(vocab_size=11, n_layer=1, n_embd=16, n_head=2))
    config = TrainConfig(learning_rate=0.2, min_lr=0.01, warmup_iters=2)
    reference_rate = schedule.learning_rate_at(5, config)
    with using(tmp_path / "package", verbose=False) as swapped:
        assert swapped.learners == ["ch11_gpt.next_token", "ch12_gpu_training.learning_rate_at"]
        ids = generate.generate(model, torch.zeros(1, 1, dtype=torch.long), 4)
        assert ids[0, 1:].tolist() == [3, 3, 3, 3]
        assert (schedule.learning_rate_at(5, config), schedule.learning_rate_at(1, config)) == (
            0.1,
            0.01,
        )
    assert schedule.learning_rate_at(5, config) == reference_rate


def test_a_swapped_part_counts_its_calls_and_a_swapped_class_stays_a_subclass(tmp_path):
    """What `used()` reports rests on these counts: a function's calls, a class's builds."""
    swapped = Swapped(tmp_path)

    class Layer(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.width = width

    def double(x):
        return 2 * x

    counted_layer = swapped.counted("ch00.Layer", Layer)
    counted_double = swapped.counted("ch00.double", double)
    swapped.parts.update({"ch00.Layer": "yours", "ch00.double": "yours", "ch00.other": "yours"})
    swapped.counted("ch00.other", double)
    layer = counted_layer(3)
    assert isinstance(layer, Layer) and layer.width == 3 and counted_layer.__name__ == "Layer"
    assert counted_double(4) == 8 and counted_double(1) == 2 and counted_double.__name__ == "double"
    assert swapped.calls == {"ch00.Layer": 1, "ch00.double": 2, "ch00.other": 0}
    assert swapped.used().splitlines() == [
        "your parts this run used: ch00.Layer, ch00.double",
        "yours but not used by this run: ch00.other",
    ]


# ----------------------------------------------------------------- check, train, sample
@pytest.fixture(scope="module")
def runs(tmp_path_factory, solved, buggy) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    """The CPU config's first steps: the reference (with the settings --learner uses), the
    solved notebooks and the buggy ones, from the same seed."""
    work = tmp_path_factory.mktemp("runs")
    prepared = cli("prepare", "--corpus", "shakespeare", "--out", "data", cwd=work)
    assert prepared.returncode == 0, prepared.stderr
    settings = [f"{k}={v}" for k, v in LEARNER_MODEL.items()]

    def train(out: str, *flags: str, env=None):
        flags = ["--data", "data", "--device", "cpu", "--threads", "1", "--out", out, *flags]
        return cli("train", *flags, *STEPS, cwd=work, env=env)

    done = {
        "reference": train("reference", *settings),
        "solved": train("solved", "--learner", str(solved)),
        "buggy": train("buggy", "--allow-deviating", env={"MINI_LLM_LEARNER": str(buggy)}),
    }
    for name, result in done.items():
        assert result.returncode == 0, (name, result.stderr)
    done["refused"] = train("refused", "--learner", str(buggy))
    return work, done


def train_losses(run: Path) -> list[float]:
    records = map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
    return [r["train_loss"] for r in records if "train_loss" in r]


@pytest.mark.slow  # trains three runs through the CLI (make check leaves it out)
def test_the_solved_notebooks_train_like_the_reference_and_the_bug_does_not(runs):
    work, done = runs
    reference, solved, buggy = (train_losses(work / n) for n in ("reference", "solved", "buggy"))
    assert len(reference) == len(solved) == len(buggy) == 6
    assert max(abs(a - b) for a, b in zip(reference, solved, strict=True)) <= REFERENCE_TOLERANCE
    assert max(abs(a - b) for a, b in zip(reference, buggy, strict=True)) > 20 * REFERENCE_TOLERANCE
    present = sum(1 for part in PARTS if part.assignment in ASSIGNMENTS)
    assert f"{present} of {len(PARTS)} are yours" in done["solved"].stdout
    assert "--learner: training with attention=explicit activation=relu" in done["solved"].stdout
    assert "mini_llm with your parts from" in done["buggy"].stdout  # from $MINI_LLM_LEARNER
    assert "--learner: checked your parts: all " in done["solved"].stdout
    assert (
        "WARNING: training with parts that deviate from the reference: ch08_self_attention."
        "scaled_dot_product_attention" in done["buggy"].stdout
    )
    refused = done["refused"]
    assert refused.returncode == 2 and "--allow-deviating" in refused.stderr
    assert "1 of your parts deviate from the reference: ch08_self_attention" in refused.stderr
    assert not (work / "refused").exists()  # refused before anything was written
    # which of the learner's parts the run called: the GPT's, not chapter 1's counting
    lines = done["solved"].stdout.splitlines()
    used = next(line for line in lines if line.startswith("your parts this run used: "))
    idle = next(line for line in lines if line.startswith("yours but not used by this run: "))
    for part in ("ch08_self_attention.scaled_dot_product_attention", "ch11_gpt.GPT"):
        assert part in used and part not in idle
    assert "ch01_bigrams.count_bigrams" in idle and "ch01_bigrams" not in used


@pytest.mark.slow  # two checks of every chapter (make check leaves it out)
def test_check_agrees_on_the_solutions_and_names_the_buggy_part(solved, buggy, tmp_path):
    agreed = cli("learner", "check", str(solved), cwd=tmp_path)
    assert agreed.returncode == 0, agreed.stderr
    assert "DEVIATES" not in agreed.stdout and "compared parts agree" in agreed.stdout
    named = cli("learner", "check", str(buggy), cwd=tmp_path)
    assert named.returncode == 1, named.stderr
    deviating = [line for line in named.stdout.splitlines() if "DEVIATES" in line]
    assert len(deviating) == 1 and "scaled_dot_product_attention" in deviating[0]
    last = named.stdout.splitlines()[-1]
    assert last.startswith(
        "first part that deviates: ch08_self_attention.scaled_dot_product_attention "
        "(max |yours - reference| = "
    )


def test_check_tries_the_gpts_shapes_where_small_visible_tests_pass(tmp_path):
    """Attention written for one sequence (k.T) passes the 2-D visible tests and fails on the
    (batch, heads, time, features) tensors of the GPT: check says so."""
    root = copy_course(tmp_path / "notebooks", ["ch08_self_attention"])
    edit_cell(
        root,
        "ch08_self_attention",
        "scaled_dot_product_attention_impl",
        lambda s: _changed(lambda t: t.replace("k.transpose(-2, -1)", "k.T"), s),
    )
    export(root, tmp_path / "package")
    checked = cli("learner", "check", str(tmp_path / "package"), cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    line = next(x for x in checked.stdout.splitlines() if "scaled_dot_product_attention" in x)
    assert "visible tests pass | DEVIATES" in line and "probe 1 at the GPT's shapes" in line


@pytest.mark.slow  # needs the trained runs (make check leaves it out)
def test_sample_with_the_learners_parts(runs, solved):
    work, _ = runs
    flags = "--checkpoint solved/ckpt.pt --max-new-tokens 20 --prompt ROMEO: --device cpu"
    sampled = cli("sample", *flags.split(), "--learner", str(solved), cwd=work)
    assert sampled.returncode == 0, sampled.stderr
    assert sampled.stdout.startswith("ROMEO:") and len(sampled.stdout) >= 26
    assert "are yours" in sampled.stderr and "are yours" not in sampled.stdout


@pytest.mark.slow  # uses the three runs, and trains a fourth
def test_sample_calls_the_learners_attention_in_a_checkpoint_trained_without_it(runs, buggy):
    """A run trained without --learner uses PyTorch's fused attention: sample --learner must
    still call the learner's attention (same weights, written out), and say that a GELU
    feed-forward network cannot call the learner's feed_forward."""
    work, _ = runs
    plain = cli("train", "--data", "data", "--device", "cpu", "--out", "plain", *STEPS, cwd=work)
    assert plain.returncode == 0, plain.stderr
    checkpoint = work / "plain" / "ckpt.pt"
    ids = torch.randint(0, 60, (2, 16), generator=torch.Generator().manual_seed(0))
    reference, _ = load_model(checkpoint, torch.device("cpu"))
    with using(buggy, verbose=False):
        learners, _ = load_model(checkpoint, torch.device("cpu"), learner=True)
        with torch.no_grad():
            buggy_logits, _ = learners(ids)
    with torch.no_grad():
        assert not torch.allclose(buggy_logits, reference(ids)[0], atol=1e-3)
        assert torch.allclose(learners(ids)[0], reference(ids)[0], atol=1e-5)  # bug gone
    flags = ["--checkpoint", "plain/ckpt.pt", "--max-new-tokens", "5", "--device", "cpu"]
    sampled = cli("sample", *flags, "--learner", str(buggy), cwd=work)
    assert sampled.returncode == 0, sampled.stderr
    assert "activation=gelu, so your feed_forward is not called" in sampled.stderr
    used = next(line for line in sampled.stderr.splitlines() if line.startswith("your parts"))
    assert "ch08_self_attention.scaled_dot_product_attention" in used  # called, as it says
    assert "feed_forward" not in used  # what the note says, measured
    resumed = cli(
        "train", "--out", "plain", "--resume", "--new-schedule", "max_iters=7",
        "--learner", str(buggy), "--allow-deviating", cwd=work,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "changed by this command: attention fused -> explicit" in resumed.stdout
    assert "activation=gelu, so your feed_forward is not called" in resumed.stdout
    assert load_checkpoint(checkpoint)["model_config"]["attention"] == "explicit"


# --------------------------------------------------------------------------- bad input
def test_a_missing_folder_and_a_corrupt_notebook_are_clear_errors_that_write_nothing(tmp_path):
    with pytest.raises(LearnerError, match="is not a folder"):
        export(tmp_path / "nowhere", tmp_path / "out")
    with pytest.raises(LearnerError, match="no exercise notebooks in"):
        export(tmp_path, tmp_path / "out")
    root = copy_course(tmp_path / "notebooks", ["ch01_bigrams", "ch08_self_attention"])
    notebook(root, "ch08_self_attention").write_text('{"cells": [', encoding="utf-8")
    with pytest.raises(LearnerError, match=r"ch08_self_attention\.ipynb is not a readable"):
        export(root, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    failed = cli("learner", "check", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert failed.returncode == 2 and "is not a folder" in failed.stderr


def test_export_never_overwrites_what_it_did_not_write(tmp_path):
    root = copy_course(tmp_path / "notebooks", ["ch01_bigrams"])
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(LearnerError, match="did not write"):
        export(root, taken)
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
    export(root, tmp_path / "package")
    (tmp_path / "package" / "notes.txt").write_text("mine")
    copy_course(root, ["ch02_ngrams"])
    export(str(root), str(tmp_path / "package"))  # an earlier export is replaced (str paths)
    assert (tmp_path / "package" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "package" / "ch02_ngrams.py").exists()


def test_a_broken_cell_is_named_and_only_its_chapter_falls_back(tmp_path):
    root = copy_course(tmp_path / "notebooks", ["ch08_self_attention", "ch09_transformer"])
    edit_cell(root, "ch09_transformer", "feed_forward_impl", lambda s: s + "\nreturn (\n")
    edit_cell(
        root,
        "ch08_self_attention",
        "causal_mask_impl",
        lambda s: "import a_module_that_does_not_exist\n" + s,
    )
    parts = {p.label: p for p in export(root, tmp_path / "package")}
    broken = parts["ch09_transformer.feed_forward"]
    assert broken.status == "error" and "does not parse" in broken.detail
    assert parts["ch09_transformer.layer_norm"].status == "present"
    with pytest.raises(LearnerError) as raised, using(tmp_path / "package", verbose=False):
        pass
    message = str(raised.value)
    assert "ch08_self_attention.py fails to import" in message
    assert "(causal_mask_impl), line 1 of the cell: ModuleNotFoundError" in message
    assert self_attention.causal_mask.__module__ == "mini_llm.self_attention"  # nothing was swapped
    checked = cli("learner", "check", str(tmp_path / "package"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    chapter_8 = [line for line in checked.stdout.splitlines() if "ch08_self_attention." in line]
    assert chapter_8 and all(" error " in line for line in chapter_8)


# ---------------------------------------------------------------- students' code, untrusted
def test_a_part_that_never_returns_is_named_and_the_others_still_run(tmp_path):
    """A loop that never ends made export and check wait 10 minutes, then fail for the whole
    package; each part now has the grader's CPU time per cell."""
    root = copy_course(tmp_path / "notebooks", ["ch08_self_attention"])
    endless = "    ### BEGIN SOLUTION\n    while True:\n        pass\n"
    edit_cell(
        root,
        "ch08_self_attention",
        "causal_mask_impl",
        lambda s: _changed(lambda t: t.replace("    ### BEGIN SOLUTION\n", endless), s),
    )
    export(root, tmp_path / "package")
    for compare in (False, True):
        report = {e["part"]: e for e in probe.run(tmp_path / "package", compare, part_cpu_s=2)}
        looping = report["ch08_self_attention.causal_mask"]
        assert looping["tests"] == "error", looping
        assert (
            looping["message"] == "did not return within 2 s of CPU time (a loop that never ends?)"
        )
        assert report["ch08_self_attention.split_heads"]["tests"] == "pass"
        if compare:
            assert looping["comparison"]["deviates"] and looping["comparison"]["call"] is None
            assert not report["ch08_self_attention.split_heads"]["comparison"]["deviates"]
    assert probe.PART_CPU_S == 30  # the grader's default --cell-timeout


def test_an_instructor_checks_a_students_export_in_the_graders_sandbox(tmp_path, bubblewrap):
    secret = tmp_path / "course" / "gradebook.txt"
    secret.parent.mkdir()
    secret.write_text("the answers")
    root = copy_course(tmp_path / "notebooks", ["ch08_self_attention"])
    edit_cell(
        root,
        "ch08_self_attention",
        "causal_mask_impl",
        lambda s: f"print(open({str(secret)!r}).read())\n" + s,
    )
    export(root, tmp_path / "package")
    sandboxed = cli("learner", "check", str(tmp_path / "package"), "--sandbox", cwd=tmp_path)
    assert sandboxed.returncode == 0, sandboxed.stderr
    assert "FileNotFoundError" in sandboxed.stdout and "the answers" not in sandboxed.stdout


def test_nothing_imports_a_learners_package_unasked(buggy, tmp_path):
    """$MINI_LLM_LEARNER reaches only --learner and use(): importing the package, or the
    grader, swaps nothing, and the grader's student processes never see the variable."""
    code = (
        "import mini_llm.cli, mini_llm.grading.cli, mini_llm.learner, mini_llm.self_attention as a; "
        "print(a.scaled_dot_product_attention.__module__)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "MINI_LLM_LEARNER": str(buggy)},
        cwd=tmp_path,
    )
    assert shown.stdout.strip() == "mini_llm.self_attention"
    os.environ["MINI_LLM_LEARNER"] = str(buggy)
    try:
        assert "MINI_LLM_LEARNER" not in limits.student_environment(str(tmp_path))
    finally:
        del os.environ["MINI_LLM_LEARNER"]
