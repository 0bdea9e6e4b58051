"""tools/fingerprint.py's runs stay valid settings (it is only run on the device, where a refused config
shows up as a traceback in place of the fingerprint lines)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import fingerprint  # noqa: E402
from trainer_cases import config  # noqa: E402


def test_every_fingerprint_run_is_a_valid_config():
    names = []
    for name, settings, steps in fingerprint.RUNS:
        cfg = config(**settings)
        assert steps > 0 and cfg.graph == "on"
        names.append(name)
    assert len(set(names)) == len(names) == 5


def test_the_gate_run_switches_the_gate_and_the_seed_clamp_on():
    settings = next(s for n, s, _ in fingerprint.RUNS if n == "b256_gate_seedclamp")
    slots = dict(config(**settings).isv_overrides())
    assert slots["gate_enabled"] == 1.0 and slots["reward_clamp_mode"] == 1.0 and slots["popart_rate"] == 0.01
