"""One definition of each shared thing: a second copy is where the next bug hides."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _defining(pattern: str, paths) -> list[str]:
    rx = re.compile(pattern, re.M)
    return sorted(str(p.relative_to(ROOT)) for p in paths if rx.search(p.read_text()))


def test_one_xorshift32_per_side():
    device = _defining(r"^\s*__device__[^\n]*\w*xorshift\w*\s*\(", ROOT.glob("cuda/**/*.[ch]*"))
    host = _defining(r"^\s*def \w*xorshift\w*\s*\(", ROOT.glob("foxc/**/*.py"))
    assert device == ["cuda/include/foxc/rng.h"]
    assert host == ["foxc/rng.py"]


def test_one_seeding_of_generator_states():
    # every xorshift32 state and host generator of a run comes from foxc.rng's (seed, stream)
    seeding = _defining(r"default_rng\(|SeedSequence\(", ROOT.glob("foxc/**/*.py"))
    allowed = {"foxc/rng.py", "foxc/data/synthetic.py"}  # synthetic.py: a market generator's own seed, not a run's
    assert set(seeding) - allowed - {s for s in seeding if s.startswith("foxc/bench/")} == set()


# Hand-written headers: device code only, no constant that Python also uses.
HAND_WRITTEN = {"rng.h", "nn_math.cuh", "position.h", "lobsim_step.cuh", "agent_reward.cuh"}


def test_every_shared_header_is_generated_and_current():
    from foxc.headers import all_headers
    generated = {h.path.name: h for h in all_headers()}
    present = {p.name for p in (ROOT / "cuda" / "include" / "foxc").iterdir()}
    assert present == set(generated) | HAND_WRITTEN
    stale = [name for name, h in generated.items() if not h.is_current()]
    assert not stale, f"stale generated headers {stale}: python tools/build_cubins.py regenerates them"
    from tools.build_cubins import parameter_macros
    for name in HAND_WRITTEN:  # a hand-written header defines its guard and parameter or argument lists, no constant
        text = (ROOT / "cuda" / "include" / "foxc" / name).read_text()
        names = re.findall(r"^#define\s+(\w+)[ \t]+((?:\w+\s*,\s*)+\w+)\s*$", text.replace("\\\n", " "), re.M)
        lists = {*parameter_macros(text), *(n for n, _ in names)}
        defined = [d for d in re.findall(r"^#define\s+(\w+)", text, re.M) if d not in lists]
        assert defined == [re.findall(r"^#ifndef\s+(\w+)", text, re.M)[0]], name


def test_one_definition_of_the_action_count():
    hits = _defining(r"^N_ACTIONS\s*=", ROOT.glob("foxc/**/*.py"))
    assert hits == ["foxc/lobsim/layout.py"]
