import os

import numpy as np
import pytest

from foxc.driver import select_backend
from foxc.driver.reference.runtime import ReferenceRuntime


@pytest.fixture
def ref_rt():
    return ReferenceRuntime("tests")


@pytest.fixture(scope="session")
def cuda_rt():
    """The CUDA runtime; skips (with the probe's reason) where no usable GPU is present."""
    choice = select_backend("auto")
    if choice.name != "cuda":
        pytest.skip(choice.reason)
    from foxc.driver.cuda_runtime import CudaRuntime
    rt = CudaRuntime(0, choice.reason, choice.device)
    yield rt
    rt.close()


@pytest.fixture
def rng(request):
    """Fresh random inputs per test, reproducible from the seed printed on failure."""
    seed = int(os.environ.get("FOXC_TEST_SEED", np.random.SeedSequence().entropy % (2**32)))
    print(f"rng seed {seed} (set FOXC_TEST_SEED to replay)")  # shown with a failure's captured output
    return np.random.default_rng(seed)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
