import pytest
from cuda.bindings import driver

from foxc.driver import CudaError, check


def test_success_unwraps_values():
    assert check((driver.CUresult.CUDA_SUCCESS,), "cuX", "doing") is None
    assert check((driver.CUresult.CUDA_SUCCESS, 7), "cuX", "doing") == 7
    assert check((driver.CUresult.CUDA_SUCCESS, 1, 2), "cuX", "doing") == (1, 2)


def test_failure_names_result_call_and_activity():
    with pytest.raises(CudaError) as e:
        check((driver.CUresult.CUDA_ERROR_INVALID_VALUE, None), "cuLaunchKernel", "launching fill_f32")
    err = e.value
    assert err.result == "CUDA_ERROR_INVALID_VALUE"
    assert err.call == "cuLaunchKernel"
    assert "cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE while launching fill_f32" in str(err)


def test_unknown_code_still_reports():
    with pytest.raises(CudaError, match=r"CUresult\(987654\)"):
        check((987654,), "cuX", "testing")


def test_device_out_of_memory_is_a_memory_error():
    """The one entry path reports the device's memory running out as the host's: one line, exit 2."""
    with pytest.raises(MemoryError) as e:
        check((driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY,), "cuMemAlloc", "allocating 'x'")
    assert isinstance(e.value, CudaError) and e.value.result == "CUDA_ERROR_OUT_OF_MEMORY"


def test_user_errors_have_one_base():
    """Every exception foxc raises for a user's mistake is a foxc.errors.UserError (caught once, by foxc.cli.run)."""
    from foxc.checkpoint import CheckpointError
    from foxc.data import DataError
    from foxc.errors import UserError
    from foxc.jsonfile import JsonFileError
    from foxc.trainer.config import ConfigError
    from foxc.trainer.rundir import ResumeError, RunDirError
    for cls in (CheckpointError, DataError, JsonFileError, ConfigError, ResumeError, RunDirError):
        assert issubclass(cls, UserError), cls


@pytest.mark.parametrize("raised, status", [("user", 2), ("oom", 2), ("bug", None)])
def test_a_bug_in_the_training_loop_keeps_its_traceback(monkeypatch, tmp_path, capsys, raised, status):
    """foxc.train: a user's mistake raised inside the loop is one line and exit 2, the host running out of memory too;
    a ValueError from a bug propagates (its traceback printed by Python), and the run that took no step is removed."""
    from foxc import train
    from foxc.errors import UserError
    from foxc.trainer.run import Trainer

    def broken(self, *args, **kwargs):
        raise {"user": UserError("--data x: a user's mistake"), "oom": MemoryError(),
               "bug": ValueError("a bug inside foxc")}[raised]
    monkeypatch.setattr(Trainer, "train_logged", broken)
    argv = ["--backend", "reference", "--n-steps", "2", "--out", str(tmp_path / "run")]
    if status is None:
        with pytest.raises(ValueError, match="a bug inside foxc"):
            train.main(argv)
    else:
        assert train.main(argv) == status
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("foxc.train: error: "), err
    assert not (tmp_path / "run").exists()
