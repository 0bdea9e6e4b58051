import pytest

from foxc.driver import CudaError, open_runtime, select_backend
from foxc.driver.cubins import pick_arch

NO_GPU = select_backend("auto").name != "cuda"


def test_reference_when_asked():
    choice = select_backend("reference")
    assert choice.name == "reference" and "asked" in choice.reason


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="auto, cuda, reference"):
        select_backend("tpu")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a usable GPU")
def test_auto_falls_back_and_says_why():
    choice = select_backend("auto")
    assert choice.name == "reference"
    assert "no usable CUDA device" in choice.reason


@pytest.mark.skipif(not NO_GPU, reason="this machine has a usable GPU")
def test_forced_cuda_without_gpu_is_a_clear_error():
    with pytest.raises(CudaError, match="--backend cuda: no usable CUDA device"):
        select_backend("cuda")


def test_env_var_picks_default(monkeypatch):
    monkeypatch.setenv("FOXC_BACKEND", "reference")
    rt = open_runtime()
    assert rt.backend == "reference" and rt.reason


def test_arch_choice():
    shipped = ["sm_80", "sm_86", "sm_89", "sm_90"]
    assert pick_arch(9, 0, shipped) == "sm_90"
    assert pick_arch(8, 6, shipped) == "sm_86"
    assert pick_arch(8, 7, shipped) == "sm_86"  # same major, newest minor not above the device
    assert pick_arch(8, 0, shipped) == "sm_80"
    with pytest.raises(CudaError, match=r"compute capability 12\.0.*ships sm_80, sm_86, sm_89, sm_90"):
        pick_arch(12, 0, shipped)


def test_a_release_after_the_context_is_gone_calls_nothing(monkeypatch):
    """A finalizer that runs after the runtime closed (a stream or array that outlived it) must not touch the
    driver: its handle died with the primary context, and a call on it can crash the process."""
    cuda_runtime = pytest.importorskip("foxc.driver.cuda_runtime")
    calls = []

    class Driver:
        def __getattr__(self, name):
            return lambda *args: calls.append(name) or (0,)
    monkeypatch.setattr(cuda_runtime, "driver", Driver())
    monkeypatch.setattr(cuda_runtime, "check", lambda result, *a, **k: result)
    monkeypatch.setattr(cuda_runtime, "_contexts", 0)
    cuda_runtime.release("cuMemFree", 1234, "freeing 'x'")
    cuda_runtime._destroy_stream(5678, "lane")
    assert calls == []
    monkeypatch.setattr(cuda_runtime, "_contexts", 1)  # while a context is held, both release
    cuda_runtime.release("cuMemFree", 1234, "freeing 'x'")
    cuda_runtime._destroy_stream(5678, "lane")
    assert calls == ["cuMemFree", "cuStreamSynchronize", "cuStreamDestroy"]
