"""--config FILE.toml on Python 3.10, which has no tomllib: read with tomli (a dependency there, by pyproject's
environment marker), not refused ('reading TOML needs Python 3.11 or later')."""
import sys

import pytest

try:
    import tomllib as parser
except ModuleNotFoundError:  # Python 3.10: tomli itself, a dependency of foxc there
    import tomli as parser

from foxc.trainer.config import ConfigError, ConfigFile


@pytest.fixture
def python_310(monkeypatch):
    """The interpreter as Python 3.10 with tomli installed: `import tomllib` fails, `import tomli` gives the same
    parser (tomllib is tomli, taken into the standard library)."""
    monkeypatch.setitem(sys.modules, "tomllib", None)  # import tomllib now raises ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "tomli", parser)


def test_a_config_file_is_read_without_tomllib(tmp_path, python_310):
    path = tmp_path / "run.toml"
    path.write_text('seq_len = 4\nsynthetic = "easy"\n\n[isv]\ngamma = 0.9\n')
    settings = ConfigFile.read(path).settings
    assert settings["seq_len"] == 4 and settings["synthetic"] == "easy" and dict(settings["isv"]) == {"gamma": 0.9}


def test_bad_toml_without_tomllib_names_the_line(tmp_path, python_310):
    path = tmp_path / "bad.toml"
    path.write_text("seq_len = 4\nn_steps = = 3\n")
    with pytest.raises(ConfigError, match=r"--config .*bad\.toml: not valid TOML: .*line 2"):
        ConfigFile.read(path)
