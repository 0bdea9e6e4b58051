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
