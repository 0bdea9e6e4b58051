"""foxc-ckpt-inspect's reader: foxc's checkpoints (format.py), and FOXC v1 files written without a `meta`
section, the Rust trainer's ("the seed's") layout.

The seed (`ml-alpha`, commits ba4bacd94c06d223 and be27fd34d2f0900f, text in shared/seeds/) writes FOXC v1 with no
meta and no checksum: `isv` (f32 × RL_SLOTS_END), 26 device buffers as raw f32 (`dqn_w`, ..., `outcome_b`), then
20 `adam_<tensor>` sections in the AdamW wire format; the encoder goes to a sibling `<stem>.encoder` file in a
format of its own. Without a meta a section's type is inferred: `adam_*` sections are AdamW states when their bytes
are exactly the wire format (only by name: a float array whose first bytes happen to read as a matching `n` must
not turn into an optimizer); any other of a length that is a multiple of 4 is float32, 1-D unless the seed's text
states its shape; the rest are bytes. Such a file is described, never resumed from.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .adamw import unpack_adamw
from .errors import CheckpointError
from .format import Checkpoint, digests_of, parse_checkpoint, parse_layout, read_file, seal_problem
from .meta import ADAMW, BYTES, CHECKSUM, META, SectionInfo

SEED_COMMITS = ("ba4bacd94c06d223", "be27fd34d2f0900f")
ISV_SLOTS_END, ISV_SLOTS_END_BEFORE = 588, 585  # crates/ml-alpha/src/rl/isv_slots.rs: RL_SLOTS_END, both commits
MAX_PROBLEM_NOTES = 8  # a hostile file may hold a million odd sections; the notes stay readable

# The ISV slots whose index the seed's text states: (index, constant, seed commit(s), file under crates/ml-alpha/,
# what it holds); "ba4bacd9" and "be27fd34" are the commits of SEED_COMMITS.
_FLUSH = ("ba4bacd9", "cuda/rl_per_push_flush.cu")
_LR = ("ba4bacd9", "cuda/rl_lr_from_mapped_pinned.cu")
_GATE = ("ba4bacd9, be27fd34", "cuda/rl_confidence_gate.cu")
_SLOTS_RS = ("ba4bacd9, be27fd34", "src/rl/isv_slots.rs")
SEED_ISV_SLOTS = (
    (400, "RL_GAMMA_INDEX", *_FLUSH, "discount factor γ"),
    (403, "RL_N_STEP_INDEX", *_FLUSH, "n-step return length"),
    (412, "RL_LR_BCE_INDEX", *_LR, "learning rate, BCE head"),
    (413, "RL_LR_Q_INDEX", *_LR, "learning rate, Q (C51) head"),
    (414, "RL_LR_PI_INDEX", *_LR, "learning rate, policy head"),
    (415, "RL_LR_V_INDEX", *_LR, "learning rate, value head"),
    (416, "RL_LR_AUX_INDEX", *_LR, "learning rate, auxiliary heads"),
    (423, "RL_MEAN_ABS_PNL_EMA_INDEX", *_GATE, "EMA of |PnL| (scales the stop-loss drawdown)"),
    (455, "RL_IMPROVEMENT_THRESHOLD_INDEX", *_LR, "LR controller: an improvement is a loss EMA below best × this"),
    (456, "RL_PLATEAU_PATIENCE_INDEX", *_LR, "LR controller: steps without improvement before the LR decays"),
    (461, "RL_LR_WARMUP_STEPS_INDEX", *_LR, "LR controller: warm-up steps"),
    (462, "RL_LR_BOOTSTRAP_INDEX", *_LR, "LR controller: bootstrap LR"),
    (463, "RL_LR_MIN_INDEX", *_LR, "LR controller: lowest LR"),
    (464, "RL_LR_MAX_INDEX", *_LR, "LR controller: highest LR"),
    (465, "RL_LR_LOSS_EMA_ALPHA_INDEX", *_LR, "LR controller: loss EMA α"),
    (466, "RL_LR_DECAY_FACTOR_INDEX", *_LR, "LR controller: decay factor on a plateau"),
    (575, "RL_HOLD_TARGET_FRAC_INDEX", *_GATE, "confidence gate: hold-fraction target"),
    (576, "RL_HOLD_FRAC_EMA_INDEX", *_GATE, "confidence gate: EMA of the hold fraction"),
    (583, "RL_ACTION_ENTROPY_EMA_INDEX", *_SLOTS_RS, "EMA of the action entropy"),
    (584, "RL_CONF_GATE_MAX_HOLD_FRAC_INDEX", *_SLOTS_RS, "confidence gate: highest hold fraction (bootstrap 0.85)"),
    (586, "RL_DRAWDOWN_PENALTY_RATE_INDEX", *_SLOTS_RS, "per-step drawdown penalty rate (bootstrap 0.01)"),
    (587, "RL_STOP_LOSS_THRESHOLD_INDEX", *_SLOTS_RS, "hard stop-loss threshold (bootstrap 2.0)"),
)
SLOT_NAMES = {index: name for index, name, *_ in SEED_ISV_SLOTS}
SLOT_ABOUT = {index: about for index, *_, about in SEED_ISV_SLOTS}

# Shapes the seed's text states (docs/superpowers/specs/2026-05-27-alpha-rl-perf-checkpoint-walkforward.md:
# "DQN weights (online) | W[128×231] + b[231]", "DQN weights (target) | Same"); every other section is 1-D.
SEED_SHAPES = {"dqn_w": (128, 231), "dqn_b": (231,), "dqn_w_target": (128, 231), "dqn_b_target": (231,)}

# The seed's device-buffer sections (save_checkpoint in src/trainer/integrated.rs, be27fd34): the tensors it
# optimises, each with its AdamW state, and target-network copies of the DQN and IQN heads.
_TENSORS = {"dqn_w": "C51/DQN head weights", "dqn_b": "C51/DQN head bias", "policy_w": "policy head weights",
            "policy_b": "policy head bias", "value_w": "value head weights", "value_b": "value head bias",
            "iqn_w_embed": "IQN head, embedding weights", "iqn_b_embed": "IQN head, embedding bias",
            "iqn_w_out": "IQN head, output weights", "iqn_b_out": "IQN head, output bias",
            "frd_w1": "FRD head, layer 1 weights", "frd_b1": "FRD head, layer 1 bias",
            "frd_w2": "FRD head, layer 2 weights", "frd_b2": "FRD head, layer 2 bias",
            "noisy_mu_w": "noisy exploration, weight means", "noisy_sigma_w": "noisy exploration, weight noise scales",
            "noisy_mu_b": "noisy exploration, bias means", "noisy_sigma_b": "noisy exploration, bias noise scales",
            "outcome_w": "outcome head weights", "outcome_b": "outcome head bias"}
SECTION_ABOUT = {
    "isv": f"the seed's ISV bus (f32 × RL_SLOTS_END, {ISV_SLOTS_END}; {ISV_SLOTS_END_BEFORE} before)",
    **{name: f"the seed's {about}" for name, about in _TENSORS.items()},
    **{f"{online}_target": f"target-network copy of {online}"
       for online in ("dqn_w", "dqn_b", "iqn_w_embed", "iqn_b_embed", "iqn_w_out", "iqn_b_out")},
    **{f"adam_{tensor}": f"the seed's AdamW state of {tensor}" for tensor in _TENSORS}}


def isv_slot_names(n: int) -> list[str]:
    """Names for an ISV of `n` slots: the seed's constant where its text states the index, else `slot_<i>`."""
    return [SLOT_NAMES.get(i, f"slot_{i}") for i in range(n)]


def read(path) -> Checkpoint:
    """The checkpoint at `path` as foxc-ckpt-inspect shows it: foxc's (read and verified as read_checkpoint does),
    or one without a meta, its types inferred and `notes` saying what cannot be known or verified."""
    try:
        ckpt = parse(read_file(Path(path)))
    except CheckpointError as exc:
        raise exc.with_path(path) from None
    if not ckpt.has_meta and any(name in SECTION_ABOUT for name in ckpt.sections):
        sibling = Path(path).with_suffix(".encoder")  # the seed's path.with_extension("encoder")
        there = f"is present ({sibling.stat().st_size:,} bytes), not read by foxc" if sibling.is_file() else "is absent"
        ckpt.notes.append("the seed keeps the encoder (perception trunk) beside it in its own format: "
                          f"{sibling} {there}")
    return ckpt


def parse(buf) -> Checkpoint:
    """A whole file in `buf`, of foxc's layout or without a meta (every section decoded with an inferred type)."""
    view = memoryview(buf).cast("B")
    step, spans = parse_layout(view)
    if META in spans:
        return parse_checkpoint(view)
    digests = digests_of(view, spans)
    if problem := seal_problem(view, spans, digests, "the file was altered or damaged (it has no meta to name the "
                                                     "section)"):
        raise CheckpointError(problem, section=CHECKSUM, offset=spans[CHECKSUM].offset)
    sections, infos, problems = {}, {}, []
    for span in spans.values():
        if span.name != CHECKSUM:
            sections[span.name], infos[span.name], problem = _infer(span, view[span.data_offset:span.end],
                                                                    digests[span.name].hex())
            if problem:
                problems.append(problem)
    sealed, isv = CHECKSUM in spans, sections.get("isv")
    slots = isv_slot_names(isv.size if isinstance(isv, np.ndarray) else 0)
    notes = _notes(sections, sealed, problems)
    return Checkpoint(step, sections, {}, infos, [], len(view), notes, False, sealed, slots)


def _infer(span, data: memoryview, sha256: str):
    """(value, SectionInfo, problem or "") of one section of a file without a meta."""
    name, nbytes, problem = span.name, len(data), ""
    if name.startswith("adam_"):
        try:
            state = unpack_adamw(data, name, span.data_offset)
            return state, SectionInfo(name, ADAMW, (state.n,), sha256, span.offset, nbytes), ""
        except CheckpointError as exc:
            problem = f"'{name}' is named like an AdamW state but is not in its wire format ({exc.reason})"
    if nbytes % 4:
        return bytes(data), SectionInfo(name, BYTES, (nbytes,), sha256, span.offset, nbytes), problem
    values, shape = np.frombuffer(data, "<f4").astype(np.float32), SEED_SHAPES.get(name)
    if shape is not None and values.size != np.prod(shape):
        problem = (f"'{name}' holds {values.size} floats, the seed's text states {' × '.join(map(str, shape))}; "
                   "read as 1-D")
        shape = None
    values = values.reshape(shape or (values.size,))
    return values, SectionInfo(name, "<f4", values.shape, sha256, span.offset, nbytes), problem


def _notes(sections: dict, sealed: bool, problems: list[str]) -> list[str]:
    """What a reader of a file without a meta must know: what is unknown, what cannot be checked."""
    notes = ["no 'meta' section: the writer, its configuration, the data it trained on and the sections' shapes "
             "are unknown, and there are no per-section sha256 digests to check; types are inferred (adam_* as "
             "AdamW, others as float32 or bytes)",
             "its 'checksum' verified: the file is as it was written" if sealed else
             "no 'checksum' section: damage to the file cannot be detected (only its framing is checked)"]
    if any(name in SECTION_ABOUT for name in sections):
        notes.append(f"sections bear the names the Rust trainer writes (the seed, commits {', '.join(SEED_COMMITS)}): "
                     "their descriptions, the dqn shapes and the ISV slot names come from its text")
        isv = sections.get("isv")
        if isinstance(isv, np.ndarray) and isv.size != ISV_SLOTS_END:
            was = " (the seed's layout before RL_SLOTS_END moved to 588)" if isv.size == ISV_SLOTS_END_BEFORE else ""
            notes.append(f"'isv' holds {isv.size} slots, the seed's RL_SLOTS_END is {ISV_SLOTS_END}{was}")
    more = len(problems) - MAX_PROBLEM_NOTES
    return notes + problems[:MAX_PROBLEM_NOTES] + ([f"... and {more} more sections like these"] if more > 0 else [])
