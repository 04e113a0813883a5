"""``mini-llm learner start|export|check`` and the ``--learner DIR`` flag of ``train`` and
``sample``."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from mini_llm.learner import probe
from mini_llm.learner.export import export
from mini_llm.learner.swap import ENVIRONMENT_VARIABLE, Swapped, use
from mini_llm.learner.workspace import RELEASE, WORKSPACE, start

HELP = "your copy of the exercises, and your own mini_llm: start, export, check"
DEFAULT_OUT = Path("my_mini_llm")

LEARNER_MODEL = {"attention": "explicit", "activation": "relu"}
"""What ``--learner`` changes in the GPT so that it calls the learner's functions: attention
written out with chapter 8's functions (not PyTorch's fused kernel) and chapter 9's ReLU
feed-forward network. A reference run with these overrides is the one to compare with."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="action")
    starting = actions.add_parser(
        "start",
        help=f"copy the exercises into your own folder ({WORKSPACE}), where you work",
        description=f"copy the released notebooks ({RELEASE}/, which `make exercises` "
        f"regenerates) into a folder of your own that git ignores ({WORKSPACE}/); a file "
        "already there is never replaced, so running it again only adds what is new",
    )
    starting.add_argument(
        "assignments", nargs="*", metavar="assignment", help="e.g. ch01_bigrams (default: all)"
    )
    starting.add_argument(
        "--release", type=Path, default=RELEASE, help=f"the release folder (default: {RELEASE})"
    )
    starting.add_argument(
        "--into", type=Path, default=WORKSPACE, help=f"your folder (default: {WORKSPACE})"
    )
    exporting = actions.add_parser(
        "export",
        help="collect the answer cells of your notebooks into a package",
        description="collect the answer cells of your notebooks into a package, one module per "
        "chapter, and say which parts are present, missing or failing their visible tests",
    )
    exporting.add_argument(
        "exercises",
        nargs="?",
        type=Path,
        default=WORKSPACE,
        help=f"folder of your notebooks, <assignment>/<assignment>.ipynb (default: {WORKSPACE})",
    )
    exporting.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"package folder (default: {DEFAULT_OUT})"
    )
    checking = actions.add_parser(
        "check",
        help="compare each exported part with the reference and name the first that differs",
        description="run each exported part on its visible tests' inputs next to the "
        "reference, in a child process under the grader's limits",
    )
    checking.add_argument("folder", type=Path, help="a folder written by mini-llm learner export")
    checking.add_argument(
        "--sandbox",
        action="store_true",
        help="run the code inside the grader's OS sandbox (bubblewrap): for instructors "
        "checking a student's export",
    )


def add_learner_argument(parser: argparse.ArgumentParser) -> None:
    """``--learner DIR`` for ``train`` and ``sample``."""
    parser.add_argument(
        "--learner",
        type=Path,
        default=os.environ.get(ENVIRONMENT_VARIABLE) or None,
        help="use your own parts from a folder written by mini-llm learner export (default: "
        f"${ENVIRONMENT_VARIABLE}); runs your code in this process, so use it for your own "
        "code only",
    )


def add_deviating_argument(parser: argparse.ArgumentParser) -> None:
    """``--allow-deviating`` for ``train``: it checks the learner's parts first."""
    parser.add_argument(
        "--allow-deviating",
        action="store_true",
        help="with --learner: train even with parts that mini-llm learner check finds "
        "deviating from the reference (to see what a bug does to training)",
    )


def check_before_training(args, report=sys.stdout) -> None:
    """``train --learner``: run ``learner check`` first. A part that deviates is refused unless
    ``--allow-deviating``: a causal mask that leaks trains to a loss no honest model reaches,
    and says nothing about it."""
    if args.learner is None:
        return
    checked = probe.run(args.learner, compare=True)
    deviating = [e for e in checked if e.get("comparison", {}).get("deviates")]
    if not deviating:
        compared = sum(1 for e in checked if e.get("comparison", {}).get("calls"))
        print(f"--learner: checked your parts: all {compared} compared agree with the reference",
              file=report)  # fmt: skip
        return
    named = "; ".join(
        f"{e['part']} ({_how_far(e['comparison'], e['test_calls'])})" for e in deviating
    )
    if not args.allow_deviating:
        raise ValueError(
            f"--learner: {len(deviating)} of your parts deviate from the reference: {named}. "
            f"Fix them (mini-llm learner check {args.learner} says more), or train with them "
            "anyway with --allow-deviating"
        )
    print(f"--learner: WARNING: training with parts that deviate from the reference: {named}",
          file=report)  # fmt: skip


def learner_overrides(args, overrides: list[str]) -> list[str]:
    """``overrides`` with :data:`LEARNER_MODEL` added where ``--learner`` is given and the
    user did not choose those keys."""
    if args.learner is None:
        return overrides
    chosen = {pair.partition("=")[0].strip() for pair in overrides}
    extra = [f"{key}={value}" for key, value in LEARNER_MODEL.items() if key not in chosen]
    if extra:
        print(
            f"--learner: training with {' '.join(extra)}, so that the GPT calls your attention "
            "and feed-forward functions (compare with a reference run of the same settings)"
        )
    return [*overrides, *extra]


def resumed_overrides(args, overrides: list[str]) -> list[str]:
    """``overrides`` of a resumed run with ``attention=explicit`` added where ``--learner`` is
    given: the same weights and formula as the fused kernel, written out so that the learner's
    attention is called. The activation is not changed: that would be another model."""
    chosen = {pair.partition("=")[0].strip() for pair in overrides}
    if args.learner is None or "attention" in chosen:
        return overrides
    return [*overrides, f"attention={LEARNER_MODEL['attention']}"]


def feed_forward_note(activation: str) -> str | None:
    """A GPT whose feed-forward networks are not chapter 9's ReLU ones (a run trained without
    --learner) cannot call the learner's feed_forward: the line that says so, or None."""
    if activation == LEARNER_MODEL["activation"]:
        return None
    return (
        f"--learner: this run's feed-forward networks use activation={activation}, so your "
        "feed_forward is not called (it is in a run trained with --learner from the start)"
    )


def use_learner(args, report=sys.stdout) -> Swapped | None:
    """Swap the learner's parts in if ``--learner`` is given, saying which are whose."""
    if args.learner is None:
        return None
    swapped = use(args.learner, verbose=False)
    print(swapped.summary(), file=report)
    return swapped


def run(args) -> None:
    """Start, export, or check (a part that deviates makes the exit status 1)."""
    if args.action == "start":
        started = start(args.assignments, args.release, args.into)
        for path in started.copied:
            print(f"copied {path}")
        if started.kept:
            print(f"kept {len(started.kept)} file(s) already in {args.into} as they are")
        first = next((p for p in started.copied if p.suffix == ".ipynb"), None)
        print(f"work in {args.into}/" + (f", e.g. open {first}" if first else ""))
        return
    if args.action == "export":
        export(args.exercises, args.out)
        print(f"wrote {args.out} from {args.exercises}")
        report = probe.run(args.out, compare=False)
        _print_table(report, compare=False)
        return
    report = probe.run(args.folder, compare=True, sandbox=args.sandbox)
    _print_table(report, compare=True)
    deviating = [e for e in report if e.get("comparison", {}).get("deviates")]
    if not deviating:
        compared = sum(1 for e in report if e.get("comparison", {}).get("calls"))
        if not compared:
            print(
                "nothing compared: no part is written yet (or none was called); solve a "
                "part in its notebook, then export and check again"
            )
            return
        print(f"all {compared} compared parts agree with the reference")
        return
    first = deviating[0]
    print(
        f"first part that deviates: {first['part']} "
        f"({_how_far(first['comparison'], first['test_calls'])}); "
        "fix it first, then export and check again"
    )
    raise SystemExit(1)


def _how_far(comparison: dict, test_calls: int) -> str:
    number = comparison["call"]
    if number is None:  # no call to name: the part did not return
        return comparison["why"]
    if number <= test_calls:
        where = f"call {number} of its visible tests"
    else:
        where = f"probe {number - test_calls} at the GPT's shapes"
    if math.isinf(comparison["difference"]) or comparison["why"] != "deviates":
        return f"{comparison['why']}, on {where}"
    return f"max |yours - reference| = {comparison['difference']:.3g}, on {where}"


def _print_table(report: list[dict], compare: bool) -> None:
    """One line a part; a chapter whose parts are all missing for one reason, one line."""
    width = max(len(entry["part"]) for entry in report)
    chapters: dict[str, list[dict]] = {}
    for entry in report:
        chapters.setdefault(entry["part"].partition(".")[0], []).append(entry)
    for chapter, entries in chapters.items():
        reasons = {(e["status"], e["detail"]) for e in entries}
        if len(reasons) == 1 and entries[0]["status"] == "missing" and len(entries) > 1:
            label = f"{chapter}.*"
            print(f"  {label:<{width}}  missing  {entries[0]['detail']} ({len(entries)} parts)")
            continue
        for entry in entries:
            print(_line(entry, width, compare))
    counts: dict[str, int] = {}
    for entry in report:
        counts[entry["status"]] = counts.get(entry["status"], 0) + 1
    print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())))


def _line(entry: dict, width: int, compare: bool) -> str:
    tests = entry["tests"] + (f": {entry['message']}" if entry["message"] else "")
    line = f"  {entry['part']:<{width}}  {entry['status']:<8} "
    if entry["status"] != "present":
        return (line + (entry["detail"] or tests)).rstrip()
    line += f"visible tests {tests or '-'}"
    if compare and "comparison" in entry:
        line += f" | {_agreement(entry['comparison'], entry['test_calls'])}"
    return line


def _agreement(comparison: dict, test_calls: int) -> str:
    if not comparison["calls"] and not comparison["deviates"]:
        return "not compared (no recorded calls)"
    if comparison["deviates"]:
        return f"DEVIATES: {_how_far(comparison, test_calls)}"
    calls = comparison["calls"]
    return f"agrees ({calls} call{'s' * (calls != 1)}, max diff {comparison['difference']:.1g})"
