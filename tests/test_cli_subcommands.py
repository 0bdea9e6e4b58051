"""A subcommand's argparse errors are named by the command and its subcommand (`foxc.data prepare: error: …`), as
its own parser names its other errors, in every command with subcommands."""
import importlib

import pytest


@pytest.mark.parametrize("module, argv, prog", [
    ("foxc.data.__main__", ["prepare", "DATA", "--out", "X", "--bogus"], "foxc.data prepare"),
    ("foxc.data.__main__", ["inspect", "DATA", "--bogus", "x"], "foxc.data inspect"),
    ("foxc.isv.__main__", ["list", "--bogus"], "foxc.isv list"),
    ("foxc.isv.__main__", ["set", "RUN", "lr_q=1e-4", "--bogus"], "foxc.isv set"),
])
def test_an_argument_a_subcommand_does_not_take_is_its_error(module, argv, prog, capsys, monkeypatch, tmp_path):
    """argparse hands a subcommand's unknown arguments back to the top parser, whose error named the command alone
    (`foxc.data: error: …`), unlike every other error of the subcommand's flags."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(module).main(argv)
    strays = " ".join(argv[argv.index("--bogus"):])
    assert (exit_.value.code, capsys.readouterr().err) == (2, f"{prog}: error: unrecognized arguments: {strays}\n")
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_flag_before_the_subcommand_is_the_commands_error(capsys):
    with pytest.raises(SystemExit):
        importlib.import_module("foxc.data.__main__").main(["--bogus", "synth", "--out", "x.parquet"])
    assert capsys.readouterr().err == "foxc.data: error: unrecognized arguments: --bogus\n"
