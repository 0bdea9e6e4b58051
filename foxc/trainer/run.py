"""The training loop: eager warm-up, the mega-graph, metrics, checkpoints and resume."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..checkpoint import CheckpointSaveError, CheckpointSaver, config_differences, read_checkpoint
from ..isv.live import LiveRequests
from ..profile import KernelProfiler, ProfilerWindow, nvtx_range
from .config import TrainConfig, isv_conflict
from .heldout import HeldOutEvaluation, room_for_heldout
from ..data.market import MarketData
from ..evaluate.selection import RULE, Validation, validates_at
from .rundir import ResumeError
from .metrics import FrameBlocks, MetricsLog, device_span, interval_record
from .state import Staging, expected_sections, export_state, import_state
from .step import RING_LEN, TrainStep


class Trainer:
    """Runs TrainStep: eagerly until the replay buffer is full, then (graph mode) one captured graph per step.

    A graph captured on a near-empty buffer would bake in empty-buffer behaviour, so capture waits until the buffer
    holds `per_capacity` transitions (`capture_after` steps: a step pushes the previous step's transition, and the
    n-step ring holds the newest n - 1). The graph bakes in every buffer address, grid size and scalar argument; a
    checkpoint loads into the same buffers and needs no new capture."""

    def __init__(self, rt, cfg: TrainConfig, market, labels, out_dir=None, data_meta: dict | None = None,
                 held=None, optimum: float | None = None, ring_len: int = RING_LEN, val=None):
        """`held`: held-out rows for the greedy evaluations; `optimum`: the synthetic market's optimal PnL (ticks per
        snapshot); `val`: the validation rows the run's policy is chosen on (None: the final weights are it).
        `self.cfg`, what the checkpoints record, has --device-data-gb resolved against the free memory."""
        cfg = cfg.with_data_budget(rt.free_bytes())
        self.rt, self.cfg = rt, cfg
        self.ts = TrainStep(rt, cfg, market, labels, ring_len)
        yard_rows = market if held is not None and optimum is None and isinstance(market, MarketData) else None
        self.heldout = HeldOutEvaluation(rt, self.ts, held, cfg, optimum, yard_rows) if held is not None else None
        self.validation = Validation(rt, self.ts.learner.params, self.ts.isv, val, cfg) if val is not None else None
        self.last_eval = None
        self.eval_history: list[tuple[int, dict]] = []  # (step, the metrics record that carries the evaluation)
        self.use_graph = cfg.graph == "on" or (cfg.graph == "auto" and rt.backend == "cuda")
        # the buffer is full from here: step s stores (s - n_step + 1) * B transitions once s >= n_step
        self.capture_after = -(-cfg.per_capacity // cfg.n_backtests) + cfg.n_step
        self.graph = None
        self.graph_step = None  # the step at which the graph was captured
        self.steps_done = 0
        self.out_dir = Path(out_dir) if out_dir else None
        self.data_meta = data_meta or {}
        self.saver = CheckpointSaver(self.out_dir) if self.out_dir else None
        self.staging = Staging(rt)
        self.live = LiveRequests(self.out_dir) if self.out_dir else None  # python -m foxc.isv set RUN_DIR ...
        self.save_errors: list[str] = []
        self.window = ProfilerWindow(rt, None)  # --profile-steps: cuProfilerStart/Stop around steps A..B
        self.kernels = None  # --profile: a KernelProfiler timing every launch of its window's steps

    def set_profiling(self, window_spec=None, kernels: KernelProfiler | None = None):
        self.window = ProfilerWindow(self.rt, window_spec)
        self.kernels = kernels

    # --- one step ----------------------------------------------------------
    def step(self):
        stream, step = self.rt.stream, self.steps_done
        self.window.before_step(step)
        if self.graph is None and self.use_graph and step >= self.capture_after:
            self.capture()
        rotation = self.ts.rotation
        if rotation is not None:
            rotation.before_step(step)  # a rotation boundary: fence, take the next slot out of the draws
        first = step == 0
        if self.kernels is not None and self.kernels.wants(step):
            self.kernels.profile_step(self.ts.launches(first))  # eager: one event per launch
        elif self.graph is not None:
            with nvtx_range("step"):
                self.graph.launch(stream)
        else:
            for name, entries in self.ts.ordered(first):
                with nvtx_range(name):
                    for entry in entries:
                        entry.launch(stream)
        if rotation is not None:
            rotation.after_step(step)  # the refill's copies, behind this step, on the side stream
        self.steps_done += 1
        self.window.after_step(step)

    def capture(self, side_first: bool = False):
        """Capture the whole step into one graph (replayed from now on); warm-up has run on this stream.
        `side_first`: issue each side lane first (the same graph on the GPU; the reference backend's order)."""
        with self.rt.capture(name="train_step") as cap:
            self.ts.capture(cap, self.rt.stream, side_first)
        self.graph = cap.graph
        self.graph_step = self.steps_done

    # --- checkpoints -------------------------------------------------------
    def save(self):
        with nvtx_range("checkpoint.save"):
            meta = {"config": self.cfg.as_dict(), "data": self.data_meta}
            return self.saver.save(self.steps_done, export_state(self.ts, self.staging), meta)

    def resume(self, path, data_sha256: str | None = None):
        """Restore every persistent array and continue from the checkpoint's step; one saved with another
        configuration is refused naming each setting that differs. `data_sha256`: this data's identity as the
        checkpoint computed it (rundir.check_same_data), compared instead of today's."""
        def same_config(meta):
            saved, now, keys = meta.get("config", {}), self.cfg.as_dict(), TrainConfig.SHAPE_KEYS
            want, got = (meta.get("data") or {}).get("sha256"), data_sha256 or self.data_meta.get("sha256")
            if want and got:  # the data by its content, where both record it: the same file may have moved
                keys = [k for k in keys if k != "data"]
            problems = config_differences({k: saved.get(k) for k in keys}, {k: now.get(k) for k in keys})
            if want and got and want != got:
                problems.append(f"data: sha256 {want} in the checkpoint, {got} now")
            if problems:
                raise ResumeError(f"{path} was saved with a different configuration: " + "; ".join(problems))

        ckpt = read_checkpoint(path, expected_sections(self.ts), check_meta_first=same_config)
        import_state(self.ts, ckpt.sections)
        self.steps_done = ckpt.step
        self.ts.diagnostics.next_step = ckpt.step  # the first frame its poll() expects
        return ckpt.step

    def set_isv(self, settings) -> list[tuple[str, float, float]]:
        """Set ISV slots between steps (a graph reads them on the device); (name, old, new) for each."""
        self.rt.stream.synchronize()  # the host view is the last step's
        changes = []
        for name, value in settings:
            changes.append((name, self.ts.isv[name], float(value)))
            self.ts.isv[name] = value
        return changes

    def apply_live_requests(self) -> list[dict]:
        """Apply the waiting `python -m foxc.isv set` requests before the next step: the changes, each with the first
        step that runs with it; one that cannot apply is moved to rejected/ with a warning."""
        changes = []
        for path, settings, problem in self.live.pending():
            # a value that conflicts with the run's shapes or the bus's other settings cannot apply either
            conflict = not problem and isv_conflict(self.ts.isv.as_dict() | dict(settings), self.cfg.n_step, live=True)
            problem = problem or (conflict[0] if conflict else "")
            if problem:
                moved = self.live.file(path, self.steps_done, "rejected")
                print(f"foxc.train: warning: ISV request {path.name} not applied: {problem} (now {moved})",
                      file=sys.stderr, flush=True)
                continue
            first = self.steps_done + 1
            for name, value in settings:
                self.ts.isv.set_on_stream(name, value, self.rt.stream)
                changes.append({"step": first, "name": name, "value": value, "request": path.name})
                print(f"ISV {name} = {value:g} from step {first} (live request {path.name})", flush=True)
            self.live.file(path, self.steps_done, "applied")
        return changes

    # --- the loop ------------------------------------------------------------
    def train(self, n_steps: int, metrics: MetricsLog | None = None, checkpoint_every: int = 0, stop=None) -> dict:
        """Run `n_steps` steps, or until `stop` turns true between two (`summary["stopped_at"]`). The host never runs
        more than `ring.lead_limit` steps ahead of the frames it has read, so every step's frame arrives once;
        records are cut from completed frames, `log_every` steps each, ending at each checkpoint too (FrameBlocks)."""
        ring, every = self.ts.diagnostics, self.cfg.log_every
        target = self.steps_done + n_steps
        blocks = FrameBlocks(target, every, checkpoint_every if self.saver else 0)
        t_start = time.perf_counter()
        frames_all, records, evals = [], [], {}
        live_changes: list[dict] = []  # applied live ISV changes not yet in a record
        eval_seconds = 0.0
        eval_every, next_eval = self.cfg.eval_every, None
        if self.heldout is not None and eval_every:
            next_eval = (self.steps_done // eval_every + 1) * eval_every
        val_every = self.cfg.val_every

        def read(wait: bool = False):
            if wait:
                self.rt.stream.synchronize()
            got = ring.poll()
            frames_all.extend(got)
            blocks.add(got)

        def emit():
            for block in blocks.complete():
                record = interval_record(block)
                for at in sorted(s for s in evals if s <= record["step"]):  # a validation between records joins the next
                    record.update(evals.pop(at))
                if self.ts.rotation is not None:
                    record["data_rotations"] = self.ts.rotation.rotations_by(record["step"])
                changes = [c for c in live_changes if c["step"] <= record["step"]]
                if changes:
                    record["isv_changes"] = changes
                    live_changes[:] = [c for c in live_changes if c["step"] > record["step"]]
                records.append(record)
                if "eval_pnl" in record:
                    self.eval_history.append((record["step"], record))
                if metrics:
                    metrics.write(record)

        while self.steps_done < target and not stop:
            if self.live is not None and self.live.due():
                live_changes += self.apply_live_requests()
            if self.steps_done - ring.next_step >= ring.lead_limit:  # back-pressure
                read()
                if self.steps_done - ring.next_step >= ring.lead_limit:
                    read(wait=True)
            self.step()
            step = self.steps_done
            save = checkpoint_every and self.saver and step % checkpoint_every == 0
            # the schedule's steps, and the last one of a run shorter than the schedule's first (its policy would
            # otherwise be the untrained final weights)
            if self.validation is not None and (validates_at(step, val_every) or (
                    step == target and not self.ts.kept.read()["validations"])):
                evals.setdefault(step, {}).update(self.validate())
                eval_seconds += evals[step]["val_seconds"]
            if step % every == 0 or step == target:
                final = step == target and self.heldout is not None
                if final or (next_eval is not None and step >= next_eval):
                    evals.setdefault(step, {}).update(self.evaluate_heldout(final=step == target))
                    eval_seconds += evals[step]["eval_seconds"]
                    while next_eval is not None and next_eval <= step:
                        next_eval += eval_every
            if save or step % every == 0 or step == target:
                read(wait=bool(save))  # a checkpoint's steps are all logged before it is: its resume loses none
                emit()
            if save:
                try:
                    self.save()
                except CheckpointSaveError as e:  # earlier checkpoints are intact: report and train on
                    self.save_errors.append(f"step {step}: {e}")
                    print(f"foxc.train: warning: checkpoint at step {step} not saved: {e}",
                          file=sys.stderr, flush=True)
        read(wait=True)
        if self.steps_done < target:  # stopped early: the partial block ends here
            blocks.end = self.steps_done
        emit()
        self.window.close()
        seconds = time.perf_counter() - t_start - eval_seconds  # training only: evaluations are timed apart
        summary = self.summary(frames_all, seconds, n_steps - (target - self.steps_done), records)
        summary["eval_seconds"] = round(eval_seconds, 3)
        summary["stopped_at"] = self.steps_done if self.steps_done < target else None
        summary["selection"] = self.selection()
        return summary

    def train_logged(self, stop=None, board=None, label: str = "") -> dict:
        """cfg.n_steps more steps logged to metrics.jsonl (and `board`; progress lines headed by `label`)."""
        metrics = MetricsLog(self.out_dir / "metrics.jsonl", self.steps_done + self.cfg.n_steps,
                             label=label, start_step=self.steps_done, tensorboard=board)
        try:
            return self.train(self.cfg.n_steps, metrics, self.cfg.checkpoint_every, stop=stop)
        finally:
            metrics.close()

    def evaluate_heldout(self, final: bool = False) -> dict:
        """A greedy pass over the held-out rows with the live weights, or (`final`) the run's policy (`eval_policy`
        names it), after the queued steps finish, so that `eval_seconds` is its own."""
        self.rt.stream.synchronize()
        policy = self.run_policy() if final else None
        try:
            with nvtx_range("evaluate"):
                self.last_eval = {"step": self.steps_done, **self.heldout.run(policy, compare=final)}
        finally:
            if policy is not None and hasattr(policy, "release"):
                policy.release()
        self.last_eval["eval_policy"] = policy.name if policy is not None else "the live weights"
        return {k: v for k, v in self.last_eval.items() if k != "step"}

    def validate(self) -> dict:
        """A greedy pass of the live weights over the validation rows, kept when the rule says so: `val_*` fields."""
        self.rt.stream.synchronize()
        with nvtx_range("validate"), room_for_heldout(self.cfg.eval_rows, "validating on the training rows' held-out "
                                                      "end (its records, and arrays of each)", self.validation.rows):
            m = self.validation.run()
        m["val_kept"] = self.ts.kept.consider(self.steps_done, m)
        return m

    def run_policy(self):
        """The weights the validation kept, flat when it kept none; None (the live weights) without validation."""
        cfg = self.cfg
        return self.ts.kept.policy(cfg.seq_len, cfg.actor, cfg.precision)

    def selection(self) -> dict | None:
        """What the run's policy is and why (summary.json's `selection`); None without validation rows."""
        r = self.ts.kept.read()
        if not r["validations"]:
            return None
        kept = r["step"] if r["step"] >= 0 else "flat"
        out = {"kept": kept, "rule": RULE, "validations": r["validations"],
               "val_rows": self.validation.rows if self.validation is not None else None}
        if r["step"] >= 0:
            out.update(val_pnl_ticks=r["val_pnl_ticks"], val_se=r["val_se"], val_trades=r["val_trades"])
        return out

    def summary(self, frames, seconds, n_steps, records) -> dict:
        """What a run did: `this_run`'s trades (the frames'), `cumulative` accounts since step 0, in price units per
        lot; steps/s the device's over the records' frames (evaluations and checkpoints left out), `seconds` the
        host's wall time of training."""
        trades = sum(f["closed_trades"] for f in frames)
        wins = sum(f["closed_wins"] for f in frames)
        span, timed, at = 0, 0, 0
        for r in records:  # the frames of each record, in order (records cover consecutive frames)
            block, at = frames[at:at + r["steps"]], at + r["steps"]
            span += device_span(block)
            timed += max(len(block) - 1, 0)
        return {
            "steps": self.steps_done, "steps_this_run": n_steps, "seconds": round(seconds, 3),
            "sps": round(timed / span, 2) if span > 0 else None,
            "frames": len(frames),
            "backend": self.rt.backend, "device": self.rt.device_name,
            "graph": self.graph is not None, "graph_captured_at_step": self.graph_step,
            "kernels_per_step": self.ts.kernel_count(),
            "this_run": {"trades": int(trades), "wins": int(wins), "win_rate": wins / trades if trades else None,
                         "net_pnl": float(sum(f["closed_pnl_sum"] for f in frames))},
            "cumulative": self.ts.sim.accounts(),
            "frames_dropped": self.ts.diagnostics.dropped, "checkpoint_errors": self.save_errors,
            "last": records[-1] if records else None, "evaluation": self.last_eval,
            "isv": self.ts.isv.as_dict(),
            "data_residency": self.residency(),
        }

    def residency(self) -> dict:
        """Which of the data is on the device: all of it, or the rotating set's slots, shards and rotations."""
        budget = self.cfg.device_data_gb
        if self.ts.rotation is None:
            return {"rotating": False, "device_data_gb": budget}
        return {"rotating": True, "device_data_gb": budget, **self.ts.rotation.describe()}

    def close(self):
        for part in (self.live, self.window, self.graph, self.staging, self.heldout, self.validation):  # None: none
            if part is not None:
                part.close()
        self.graph = None


def write_json(path: Path, doc: dict):
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
