"""The fitted cost-model parameters and the record of the fit that produced them.

Written by `python bench/fit_cost_model.py` (simcore/calibration/fit.py); do not edit by hand:
tests/simcore/calibration/test_fitted_parameters.py fails when this is not what the fit gives on the
current code.
"""

from typing import Any

FIT: dict[str, Any] = {
    "parameters": {
        "gemm_efficiency_volta": 0.761,
        "gemm_efficiency_ampere": 0.662,
        "gemm_efficiency_hopper": 0.62,
        "gemm_half_time_volta_s": 8.02e-05,
        "gemm_half_time_ampere_s": 1.44e-05,
        "gemm_half_time_hopper_s": 1.3e-05,
        "memory_efficiency": 0.801,
        "host_iteration_s": 0.0215,
        "comm_sm_share": 0.0,
        "gemm_shape_model": False,
        "gemm_prologue_k": 0.0,
    },
    "fitted_sources": ["megatron20", "mcore24"],
    "rows": [
        {"id": "mcore24-h100-weak-1.7b", "measured_s": 0.452, "predicted_s": 0.3712418054328285},
        {"id": "mcore24-h100-weak-7.1b", "measured_s": 0.8, "predicted_s": 0.6815724863368946},
        {"id": "mcore24-h100-weak-16b", "measured_s": 0.85, "predicted_s": 0.8466299053917855},
        {"id": "mcore24-h100-weak-32b", "measured_s": 0.892, "predicted_s": 1.1355872073311088},
        {"id": "mcore24-h100-weak-70b", "measured_s": 2.177, "predicted_s": 2.3072887033949683},
        {"id": "mcore24-h100-weak-119b", "measured_s": 3.648, "predicted_s": 3.645972967240852},
        {"id": "mcore24-h100-weak-177b", "measured_s": 5.259, "predicted_s": 5.282934380103105},
        {"id": "mcore24-h100-weak-314b", "measured_s": 8.399, "predicted_s": 9.044722314221685},
        {"id": "mcore24-h100-weak-462b", "measured_s": 12.716, "predicted_s": 13.295373205181876},
        {"id": "megatron20-dgxa100-tp1-1b", "measured_s": 1.076, "predicted_s": 1.1190443207560852},
        {"id": "megatron20-dgx2v100-tp1-1b", "measured_s": 1.121, "predicted_s": 1.1898517889268854},
        {"id": "megatron20-dgxa100-dp128-tp1-1b", "measured_s": 1.153, "predicted_s": 1.1455466337995635},
        {"id": "megatron20-dgxa100-tp2-2b", "measured_s": 1.026, "predicted_s": 1.0374239870871056},
        {"id": "megatron20-dgx2v100-tp2-2b", "measured_s": 1.093, "predicted_s": 1.1111413777338661},
        {"id": "megatron20-dgxa100-dp128-tp2-2b", "measured_s": 1.101, "predicted_s": 1.0822715688371056},
        {"id": "megatron20-dgxa100-tp4-4b", "measured_s": 1.162, "predicted_s": 1.1509347547043827},
        {"id": "megatron20-dgx2v100-tp4-4b", "measured_s": 1.238, "predicted_s": 1.2377801805800122},
        {"id": "megatron20-dgxa100-dp128-tp4-4b", "measured_s": 1.242, "predicted_s": 1.2421083607043828},
        {"id": "megatron20-dgxa100-tp8-8b", "measured_s": 1.343, "predicted_s": 1.310731966240237},
        {"id": "megatron20-dgx2v100-tp8-8b", "measured_s": 1.407, "predicted_s": 1.4077423197227736},
        {"id": "megatron20-dgxa100-dp128-tp8-8b", "measured_s": 1.38, "predicted_s": 1.4949744982402369},
    ],
    "mean_abs_error_pct": 5.054,
    "inputs_sha256": "a1264fd36daa89a43a9d98d9b9319ab7ea8909e318d5c4e6f47b1f51741a0854",
    "code_version": {
        "simulator": "0.1.0",
        "git_commit": "3400a0a92b90ae57303183fe2d8e17b7918e05a3",
    },
}
