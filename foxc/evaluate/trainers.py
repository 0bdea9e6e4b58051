"""The pluggable training step of a walk-forward fold.

A fold trainer is an object with

    name: str            shown in every report ("baseline: ..." for anything not the RL agent)
    is_baseline: bool    True unless it trains the RL agent
    train(window, steps, out_dir, config) -> Path
        trains on `window` (foxc.data.MarketData: the fold's training records, tick, source)
        for `steps` steps, writes its checkpoint(s) and, when it has them, `metrics.jsonl`
        (training curves, see foxc.report) into `out_dir`; returns the checkpoint to evaluate
    load_policy(checkpoint, config, rt) -> policy
        the policy (see foxc.evaluate.runner) that checkpoint holds, for evaluation with learning off
        on runtime `rt` (where the evaluation's simulator runs: a policy may run on the device too)

`config` is a plain dict (JSON-able, so it crosses process and machine boundaries): the
walk-forward's `train_args` (training flags it did not recognise, passed through verbatim),
`backend`, `seed`, `fold` and `cache` (the prepared cache its windows come from, "" for none).
Trainers are named by a spec string, resolved in every worker process: a short name from
TRAINERS or "package.module:attribute". TRAINERS holds this floor's own (baseline); a trainer of a floor
above registers its name from there (`register`: foxc.walkforward registers rl, foxc.trainer.fold's), and
a fold's worker process registers what its caller had (FoldSpec.trainers).
"""
from __future__ import annotations

import importlib

TRAINERS = {
    "baseline": "foxc.evaluate.baseline:TRAINER",
}


def register(name: str, target: str) -> None:
    """Name the trainer at `target` ("package.module:attribute") `name`; the registered are listed before this
    floor's own."""
    own = {k: v for k, v in TRAINERS.items() if k != name}
    TRAINERS.clear()
    TRAINERS.update({name: target, **own})


def resolve_trainer(spec: str):
    """The trainer named by `spec` (a TRAINERS key or "module:attribute")."""
    target = TRAINERS.get(spec, spec)
    if ":" not in target:
        raise ValueError(f"unknown trainer '{spec}': use one of {', '.join(TRAINERS)} or 'package.module:attribute'")
    module, attr = target.split(":", 1)
    trainer = getattr(importlib.import_module(module), attr)
    for need in ("name", "is_baseline", "train", "load_policy"):
        if not hasattr(trainer, need):
            raise TypeError(f"trainer '{spec}' has no '{need}' (see foxc.evaluate.trainers)")
    return trainer
