"""`foxc-ckpt-inspect PATH [--isv | --section NAME [--full] | --diff OTHER | --verify] [--json]`: look inside a
FOXC checkpoint (also tools/ckpt_inspect.py), a file of the Rust trainer's layout too (seed_layout.py). Exit status
as diff(1): 0 valid or identical, 1 the answer is no (--verify: invalid; --diff: the files differ), 2 trouble (a bad
flag, or in another mode a file that is no valid checkpoint: one line on stderr)."""
from __future__ import annotations

import json
import math
import sys

import numpy as np

from ..cli import ArgumentParser, PathArg, run, text_table
from .adamw import AdamState
from .errors import CheckpointError
from .format import MAGIC, VERSION, Checkpoint
from .meta import config_differences
from .seed_layout import SECTION_ABOUT, SLOT_ABOUT, read

PROG = "foxc-ckpt-inspect"
EXIT_NO = 1  # as diff(1): 1 a negative answer (--verify, --diff); 2 trouble (a bad file or flag: cli.fail)
STAT_COLUMNS = ["name", "bytes", "dtype", "shape", "min", "max", "mean", "std", "nan", "inf"]
ADAMW_COLUMNS = ["name", "n", "step", "lr", "beta1", "beta2", "eps", "wd", "m_norm", "v_norm"]


def array_stats(values: np.ndarray) -> dict:
    """min, max, mean, std over the finite values, and how many are NaN or infinite."""
    stats = {"nan": 0, "inf": 0}
    if np.issubdtype(values.dtype, np.floating):
        stats = {"nan": int(np.isnan(values).sum()), "inf": int(np.isinf(values).sum())}
        values = values[np.isfinite(values)]
    if values.size == 0:
        return {**stats, "min": None, "max": None, "mean": None, "std": None}
    with np.errstate(over="ignore", invalid="ignore"):  # a sum or square past float64's range is inf, quietly
        mean, std = float(values.mean(dtype=np.float64)), float(values.std(dtype=np.float64))
    return {**stats, "min": values.min().item(), "max": values.max().item(), "mean": mean, "std": std}


def section_rows(ckpt: Checkpoint) -> list[dict]:
    """One row per section (two for AdamW: m and v); `about` describes the seed's sections in a file without a meta."""
    rows = []
    for name, value in ckpt.sections.items():
        info = ckpt.infos[name]
        row = {"name": name, "bytes": info.nbytes, "dtype": info.dtype, "shape": list(info.shape)}
        if isinstance(value, AdamState):
            row.update(name=f"{name}.m", dtype=f"adamw step {value.step}", **array_stats(value.m))
        elif not isinstance(value, bytes):
            row.update(array_stats(value))
        rows.append({**row, "about": None if ckpt.has_meta else SECTION_ABOUT.get(name)})
        if isinstance(value, AdamState):
            rows.append({"name": f"{name}.v", "bytes": None, "dtype": None, "shape": None, **array_stats(value.v),
                         "about": None})
    return rows


def adamw_rows(ckpt: Checkpoint) -> list[dict]:
    """Each AdamW section as the wire format holds it: n, step, settings, and the L2 norms of m and v."""
    return [{"name": name, "n": value.n, **value.settings, "m_norm": float(np.linalg.norm(value.m.astype(np.float64))),
             "v_norm": float(np.linalg.norm(value.v.astype(np.float64)))}
            for name, value in ckpt.sections.items() if isinstance(value, AdamState)]


def print_table(rows: list[dict], columns: list[str]) -> None:
    print(text_table(rows, columns, lambda v: "-" if v is None else f"{v:.6g}" if isinstance(v, float) else
                     "[" + ", ".join(map(str, v)) + "]" if isinstance(v, list) else str(v)))


def print_notes(ckpt: Checkpoint, who: str = "") -> None:
    for note in ckpt.notes:
        print(f"note: {who}{note}")


def show(ckpt: Checkpoint, path: str, as_json: bool) -> None:
    rows, adamw, meta = section_rows(ckpt), adamw_rows(ckpt), ckpt.meta
    if as_json:
        return dump({"path": path, "magic": f"{MAGIC:#010x}", "version": VERSION, "step": ckpt.step,
                     "sections": ckpt.n_sections, "bytes": ckpt.size, "has_meta": ckpt.has_meta,
                     "sealed": ckpt.sealed, "foxc_version": meta.get("foxc_version"), "data": meta.get("data"),
                     "skipped": ckpt.skipped, "notes": ckpt.notes, "config": meta.get("config"),
                     "section_table": rows, "adamw": adamw})
    framing = ", ".join([f"{len(ckpt.sections)} of state", "meta" if ckpt.has_meta else "no meta",
                         "checksum" if ckpt.sealed else "no checksum"])
    writer = f"written by foxc {meta['foxc_version']}" if ckpt.has_meta else "writer unknown"
    print(f"{path}: FOXC v{VERSION}, step {ckpt.step}, {ckpt.n_sections} sections ({framing}), {ckpt.size:,} bytes, "
          f"{writer}")
    if meta.get("data"):
        print("data: " + ", ".join(f"{k} {v}" for k, v in meta["data"].items()))
    print_table([{k: "" if v is None and k in ("bytes", "dtype", "shape", "about") else v for k, v in row.items()}
                 for row in rows], STAT_COLUMNS + (["about"] if any(row["about"] for row in rows) else []))
    if adamw:
        print("AdamW states (wire format: n, step, lr, beta1, beta2, eps, wd; L2 norms of m and v):")
        print_table(adamw, ADAMW_COLUMNS)
    if ckpt.skipped:
        print("skipped (not described by the meta): " + ", ".join(ckpt.skipped))
    print_notes(ckpt)


def show_isv(ckpt: Checkpoint, as_json: bool) -> None:
    values = ckpt.isv()
    if as_json:
        return dump({"step": ckpt.step, "isv": values, "notes": ckpt.notes})
    columns = ["index", "slot", "value"] + ([] if ckpt.has_meta else ["about"])
    print_table([{"index": i, "slot": name, "value": value, "about": SLOT_ABOUT.get(i, "")}
                 for i, (name, value) in enumerate(values.items())], columns)
    print_notes(ckpt)


def show_section(ckpt: Checkpoint, path: str, name: str, as_json: bool, full: bool) -> None:
    if name not in ckpt.sections:
        raise CheckpointError(f"no section '{name}' (the file has: {', '.join(ckpt.sections)})", path=path)
    value, info = ckpt.sections[name], ckpt.infos[name]
    if as_json:
        return dump({"name": name, "dtype": info.dtype, "shape": list(info.shape), **(
            {**value.settings, "m": value.m.tolist(), "v": value.v.tolist()} if isinstance(value, AdamState) else
            {"hex": value.hex()} if isinstance(value, bytes) else {"values": value.tolist()})})
    checked = "" if ckpt.has_meta else " (computed: no meta to check it against)"
    print(f"section '{name}': {info.dtype} {list(info.shape)}, {info.nbytes:,} bytes, sha256 {info.sha256}{checked}")
    with np.printoptions(threshold=sys.maxsize if full else 1000, linewidth=120):
        if isinstance(value, AdamState):
            print(", ".join(f"{k} {v:.9g}" for k, v in value.settings.items()))
            print("m =", np.array2string(value.m))
            print("v =", np.array2string(value.v))
        elif isinstance(value, bytes):
            shown = value if full else value[:256]
            print(shown.hex(" ", 4) + ("" if len(shown) == len(value) else f" … ({len(value) - len(shown)} more)"))
        else:
            print(np.array2string(value))
    print_notes(ckpt)


def max_abs_diff(a, b) -> tuple[float | None, str]:
    """(the largest |a - b|, 0.0 when bit-identical, NaN against NaN equal; None when not comparable) and a note
    saying why not, or what else differs ("" when nothing)."""
    if isinstance(a, AdamState) or isinstance(b, AdamState):
        if type(a) is not type(b) or a.n != b.n:
            return None, "types differ" if type(a) is not type(b) else f"n {a.n} vs {b.n}"
        settings = ", ".join(k for k in a.settings if a.settings[k] != b.settings[k])
        return max(_array_diff(a.m, b.m), _array_diff(a.v, b.v)), settings and f"settings differ: {settings}"
    if isinstance(a, bytes) or isinstance(b, bytes):
        return (0.0, "") if a == b else (None, "bytes differ")
    if a.dtype != b.dtype or a.shape != b.shape:
        return None, f"{a.dtype} {list(a.shape)} vs {b.dtype} {list(b.shape)}"
    return _array_diff(a, b), ""


def _array_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.tobytes() == b.tobytes():
        return 0.0
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        delta = np.abs(x - y)
    delta = np.where((x == y) | (np.isnan(x) & np.isnan(y)), 0.0, np.where(np.isnan(delta), np.inf, delta))
    return float(delta.max()) if delta.size else 0.0


def show_diff(ckpt: Checkpoint, other: Checkpoint, path: str, other_path: str, as_json: bool) -> int:
    rows = []
    for name in {**ckpt.sections, **other.sections}:  # ckpt's order, then what only `other` has
        if name in other.sections and name in ckpt.sections:
            diff, note = max_abs_diff(ckpt.sections[name], other.sections[name])
        else:
            diff, note = None, f"only in {path if name in ckpt.sections else other_path}"
        rows.append({"name": name, "max_abs_diff": diff, "note": note})
    differing = [r["name"] for r in rows if r["max_abs_diff"] != 0.0 or r["note"]]
    identical = not differing and ckpt.step == other.step
    unknown = [p for c, p in ((ckpt, path), (other, other_path)) if not c.has_meta]
    config = ([f"unknown: {' and '.join(unknown)} {'has' if len(unknown) == 1 else 'have'} no meta"] if unknown else
              config_differences(ckpt.config, other.config, sides=(f"in {path}", f"in {other_path}")))
    if as_json:
        dump({"identical": identical, "steps": [ckpt.step, other.step], "sections": rows, "differing": differing,
              "config_differences": config})
        return 0 if identical else EXIT_NO
    if ckpt.step != other.step:
        print(f"step: {ckpt.step} vs {other.step}")
    print_table([{**r, "max_abs_diff": "–" if r["max_abs_diff"] is None else r["max_abs_diff"]} for r in rows],
                ["name", "max_abs_diff", "note"])
    for line in config:
        print(f"config {line}")
    print_notes(ckpt, f"{path}: ")
    print_notes(other, f"{other_path}: ")
    print("identical" if identical else
          f"differs: {len(differing)} of {len(rows)} sections" + ("" if ckpt.step == other.step else ", step"))
    return 0 if identical else EXIT_NO


def dump(record: dict) -> None:
    """As JSON, every non-finite float as "nan", "inf", "-inf" (JSON has none), bytes as hex."""
    def finite(value):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        return [finite(v) for v in value] if isinstance(value, (list, tuple)) else value
    print(json.dumps(finite(record), indent=1, allow_nan=False,
                     default=lambda v: v.hex() if isinstance(v, bytes) else str(v)))


def parse_args(argv):
    ap = ArgumentParser(prog=PROG, description="Inspect, verify and compare FOXC checkpoints.",
                        epilog="exit status: 0 ok, valid or identical; 1 --verify invalid or --diff differs; "
                               "2 a bad flag, or a file that is not a valid checkpoint")
    ap.add_argument("path", type=PathArg("a checkpoint file"), help="a checkpoint-<step>.foxc file")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--isv", action="store_true", help="every ISV slot by name and value")
    mode.add_argument("--section", metavar="NAME", help="the values of one section")
    mode.add_argument("--diff", metavar="OTHER", type=PathArg("a checkpoint file"),
                      help="per-section max abs difference against OTHER")
    mode.add_argument("--verify", action="store_true", help="exit 0 when valid, 1 with the reason when not")
    ap.add_argument("--full", action="store_true", help="with --section: print every value, not a summary")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)
    if args.full and args.section is None:
        ap.error("--full: only with --section (it prints every value of that section)")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run(PROG, lambda: verify(args) if args.verify else inspect(args))  # a bad file, an OSError: one line, 2


def inspect(args) -> int:
    ckpt = read(args.path)  # its errors name the file
    if args.diff is not None:
        return show_diff(ckpt, read(args.diff), args.path, args.diff, args.json)
    if args.isv:
        show_isv(ckpt, args.json)
    elif args.section is not None:
        show_section(ckpt, args.path, args.section, args.json, args.full)
    else:
        show(ckpt, args.path, args.json)
    return 0


def verify(args) -> int:
    """Exit 0 and what was verified (all of it only with both meta and checksum), or 1 and why the file is invalid."""
    try:
        ckpt = read(args.path)
    except CheckpointError as exc:
        ckpt, valid, reason = None, False, str(exc)
    else:
        valid, reason = True, f"step {ckpt.step}, {ckpt.n_sections} sections, {ckpt.size:,} bytes, " + (
            ("every sha256 verified" if ckpt.sealed else "every section's sha256 verified, not sealed (no checksum)")
            if ckpt.has_meta else "the file checksum verified, no meta" if ckpt.sealed else
            "framing verified; no meta and no checksum to verify the data against")
    if args.json:
        dump({"path": args.path, "valid": valid, "reason": reason, **({"step": ckpt.step} if valid else {}),
              "notes": ckpt.notes if valid else []})
    else:
        print(f"valid: {args.path}: {reason}" if valid else f"invalid: {reason}")
        if valid:
            print_notes(ckpt)
    return 0 if valid else EXIT_NO


if __name__ == "__main__":
    sys.exit(main())
