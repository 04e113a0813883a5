"""What a checkpoint holds for a run to continue exactly, and what a resumed run may change.

A resumed run must keep the learning-rate schedule it was started with (a longer ``max_iters``
would otherwise redraw the cosine and make the rate jump): a changed schedule is refused with
the keys that changed, unless ``new_schedule=True`` accepts it. It must also keep its number of
processes, since each process continues its own stream of batches, and its model and optimizer.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from mini_llm.engine import schedule
from mini_llm.engine.checkpoint import (
    CheckpointError,
    load_checkpoint,
    rng_states,
    save_checkpoint,
    set_rng_states,
)

if TYPE_CHECKING:
    from mini_llm.engine.train import TrainConfig, _Run

SCHEDULE_KEYS = (
    "learning_rate",
    "min_lr",
    "warmup_iters",
    "lr_decay_iters",
    "max_iters",
    "schedule",
)
BATCHES = ("train_batches", "val_batches")  # the run's batch functions, saved by these names


def _decay_end(settings: dict) -> int:
    """The step where the cosine reaches ``min_lr``."""
    return settings["lr_decay_iters"] or settings["max_iters"]


def schedule_changes(saved: dict, config: TrainConfig) -> list[str]:
    """What makes ``config``'s learning rates differ from those of the ``saved`` settings.

    ``max_iters`` and ``lr_decay_iters`` count only through the step where the cosine ends
    (``lr_decay_iters``, or ``max_iters`` when it is unset): with that step kept, a run can be
    made longer without touching its schedule.
    """
    ours = asdict(config)
    saved = {"schedule": "cosine", **saved}  # checkpoints from before the noam option
    changed = [
        f"{key} {saved[key]} -> {ours[key]}"
        for key in ("schedule", "learning_rate", "min_lr", "warmup_iters")
        if saved[key] != ours[key]
    ]
    if _decay_end(saved) != _decay_end(ours):
        keys = [
            f"{key} {saved[key]} -> {ours[key]}"
            for key in ("lr_decay_iters", "max_iters")
            if saved[key] != ours[key]
        ]
        changed.append(
            f"{' and '.join(keys)}: the cosine would end at step {_decay_end(ours)}, "
            f"not {_decay_end(saved)}"
        )
    return changed


def refuse_schedule_change(saved: dict, config: TrainConfig, step: int) -> None:
    """A :class:`CheckpointError` where ``config`` changes the rates of the ``saved`` run, unless
    ``config.new_schedule``: it says how far the rate would jump and which settings keep it."""
    changed = schedule_changes(saved, config)
    if not changed or config.new_schedule:
        return
    saved = {"schedule": "cosine", **saved}
    old = replace(config, **{k: saved[k] for k in SCHEDULE_KEYS})
    _, worst = max(  # where the two schedules are furthest apart from here on
        (abs(schedule.learning_rate_at(s, config) - schedule.learning_rate_at(s, old)), s)
        for s in range(step, max(config.max_iters, step + 1))
    )
    put_back = [
        f"{key}={saved[key]}"
        for key in ("schedule", "learning_rate", "min_lr", "warmup_iters")
        if saved[key] != getattr(config, key)
    ]
    if _decay_end(saved) != _decay_end(asdict(config)):
        put_back.append(f"lr_decay_iters={_decay_end(saved)} (after it the rate stays at min_lr)")
    raise CheckpointError(
        f"resume refused: the learning-rate schedule differs from the checkpoint's "
        f"({'; '.join(changed)}): at step {worst} the rate would be "
        f"{schedule.learning_rate_at(worst, config):.3g} instead of "
        f"{schedule.learning_rate_at(worst, old):.3g}. To train on with the saved schedule, "
        f"set {', '.join(put_back)}; to use the new schedule anyway, give mini-llm train "
        "--new-schedule (new_schedule=True in a TrainConfig)"
    )


def first_difference(saved: dict, ours: dict) -> str:
    """One line on how two state dicts differ, where PyTorch lists every tensor."""
    missing, extra = saved.keys() - ours.keys(), ours.keys() - saved.keys()
    shapes = [
        f"{name} is {list(saved[name].shape)} there, {list(ours[name].shape)} here"
        for name in saved.keys() & ours.keys()
        if saved[name].shape != ours[name].shape
    ]
    differences = (
        sorted(shapes)
        + [f"{name} only there" for name in sorted(missing)]
        + [f"{name} only here" for name in sorted(extra)]
    )
    if not differences:
        return "the optimizer's state does not fit the model"
    more = f", and {len(differences) - 1} more" if len(differences) > 1 else ""
    return differences[0] + more


def save(run: _Run) -> None:
    """Write ``run``'s checkpoint, the one :func:`restore` reads; every rank's random generators
    and batch positions go to rank 0, which writes it."""
    positions = {name: _state_of(getattr(run, name)) for name in BATCHES}
    ranks = run.world.gather({"rng": rng_states(), **positions})
    if run.world.is_main:
        result = run.result
        save_checkpoint(
            {
                "model": run.model.state_dict(),
                "optimizer": run.optimizer.state_dict(),
                "step": result.step,
                "train_config": asdict(run.config),
                "ranks": ranks,
                "history": {"train": result.train_losses, "val": result.val_losses},
                **run.checkpoint_extra,
            },
            run.checkpoint_path,
        )


def _state_of(batches) -> dict | None:
    return batches.state_dict() if hasattr(batches, "state_dict") else None


def restore(run: _Run) -> None:
    """Put ``run``'s model, optimizer, history and every random generator back as its checkpoint
    left them.

    Refused (:class:`CheckpointError`) where that cannot continue the same run: another model
    or optimizer, another learning-rate schedule, another number of processes.
    """
    if run.checkpoint_path is None:
        raise ValueError("resume=True needs out_dir, the folder that holds ckpt.pt")
    state = load_checkpoint(run.checkpoint_path, map_location=run.world.device)
    model, result, world = run.model, run.result, run.world
    ranks = state["ranks"]
    if len(ranks) != world.world_size:
        raise CheckpointError(
            f"the checkpoint was written by {len(ranks)} process(es) and this run has "
            f"{world.world_size}: each process continues its own stream of batches and random "
            f"numbers, so resume with {len(ranks)} (torchrun --nproc_per_node {len(ranks)}), "
            "or train into a new out_dir"
        )
    refuse_schedule_change(state["train_config"], run.config, state["step"])
    try:
        model.load_state_dict(state["model"])
        run.optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError):
        raise CheckpointError(
            f"the checkpoint was written for a different model or optimizer "
            f"({first_difference(state['model'], model.state_dict())}); resume with the settings "
            "it was trained with, or train into a new out_dir (mini-llm train --out)"
        ) from None
    result.step = state["step"]
    result.train_losses = [tuple(pair) for pair in state["history"]["train"]]
    result.val_losses = [tuple(pair) for pair in state["history"]["val"]]
    mine = ranks[world.rank]
    set_rng_states(mine["rng"])
    for name in BATCHES:
        batches = getattr(run, name)
        if mine[name] is not None and hasattr(batches, "load_state_dict"):
            batches.load_state_dict(mine[name])
    if result.step >= run.config.max_iters:
        raise ValueError(f"the run is already at step {result.step}; raise max_iters to train more")
