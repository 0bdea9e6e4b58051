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
HAND_WRITTEN = {"rng.h", "nn_math.cuh", "position.h", "lobsim_step.cuh", "lobsim_passive.cuh", "agent_reward.cuh",
                "replay_rows.cuh", "agent_step_end.cuh", "bridge.cuh"}


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


def _imports(path: pathlib.Path) -> set[str]:
    """The foxc modules a file imports anywhere in it (function-level imports too), as dotted names."""
    import ast
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])  # where a relative import starts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}  # `from . import x` names a module x
    return {m for m in found if m.split(".")[0] == "foxc"}


def _import_graph() -> dict[str, set[str]]:
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in ROOT.glob("foxc/**/*.py")}
    return {m: {t for t in _imports(p) if t in files and t != m} for m, p in files.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """No two modules import each other, even through functions: a lazy import that breaks a circle at load time
    still ties the two files together (a package's __init__ re-exporting its modules is not a circle of them)."""
    graph = _import_graph()
    for m in graph:  # a package's face imports its own modules; they may import the package's other modules
        if m.count(".") >= 1 and (ROOT / pathlib.Path(*m.split("."), "__init__.py")).is_file():
            graph[m] = {t for t in graph[m] if not t.startswith(m + ".")}
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_one_refusal_of_an_empty_path():
    """"an empty path" was written in six places, each with its own test of emptiness: one definition now
    (foxc/paths.py), which the argparse type of every path flag and the library's own checks call."""
    assert _defining(r"an empty path", ROOT.glob("foxc/**/*.py")) == ["foxc/paths.py"]


PATH_FLAGS = {"--out", "--dir", "--data", "--json", "--resume-from", "--config", "--diff", "--run-dir", "path",
              "run_dir", "data"}


def test_every_path_flag_is_a_patharg():
    """Every flag or positional that takes a path (by its name) is `type=PathArg(WHAT)`: argparse refuses an
    empty one (an unset shell variable, read as the current directory or skipped as not given) naming the flag."""
    import ast
    seen, bare = [], []
    for path in sorted(ROOT.glob("foxc/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                    in ("add_argument", "add") and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value in PATH_FLAGS):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            if isinstance(keywords.get("action"), ast.Constant):  # --json store_true: a switch, no path
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno} {node.args[0].value}"
            seen.append(where)
            kind = keywords.get("type")
            if not (isinstance(kind, ast.Call) and getattr(kind.func, "id", None) == "PathArg"):
                bare.append(where)
    assert len(seen) >= 20 and bare == [], (len(seen), bare)


def test_one_reader_of_json():
    """json.loads raises a RecursionError, int()'s digit limit or a UnicodeDecodeError on absurd input; every file
    foxc and its tools read go through foxc/jsonfile.py, which says what is wrong and names the file."""
    assert _defining(r"json\.loads?\(", [*ROOT.glob("foxc/**/*.py"), *ROOT.glob("tools/*.py")]) == ["foxc/jsonfile.py"]
