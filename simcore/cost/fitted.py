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
        "gemm_half_time_ampere_s": 1.61e-05,
        "gemm_half_time_hopper_s": 1.53e-05,
        "memory_efficiency": 0.801,
        "host_iteration_s": 0.0215,
        "comm_sm_share": 0.0,
        "gemm_shape_model": False,
        "gemm_prologue_k": 0.0,
    },
    "fitted_sources": ["megatron20", "mcore24"],
    "rows": [
        {"id": "mcore24-h100-weak-1.7b", "measured_s": 0.452, "predicted_s": 0.37772883600187296},
        {"id": "mcore24-h100-weak-7.1b", "measured_s": 0.8, "predicted_s": 0.692259989359669},
        {"id": "mcore24-h100-weak-16b", "measured_s": 0.85, "predicted_s": 0.8401443950217513},
        {"id": "mcore24-h100-weak-32b", "measured_s": 0.892, "predicted_s": 1.1317410451770464},
        {"id": "mcore24-h100-weak-70b", "measured_s": 2.177, "predicted_s": 2.287679313471295},
        {"id": "mcore24-h100-weak-119b", "measured_s": 3.648, "predicted_s": 3.647027241726303},
        {"id": "mcore24-h100-weak-177b", "measured_s": 5.259, "predicted_s": 5.2612356747695825},
        {"id": "mcore24-h100-weak-314b", "measured_s": 8.399, "predicted_s": 8.975996454809344},
        {"id": "mcore24-h100-weak-462b", "measured_s": 12.716, "predicted_s": 13.242600568198043},
        {"id": "megatron20-dgxa100-tp1-1b", "measured_s": 1.076, "predicted_s": 1.119537320756085},
        {"id": "megatron20-dgx2v100-tp1-1b", "measured_s": 1.121, "predicted_s": 1.1898517889268854},
        {"id": "megatron20-dgxa100-dp128-tp1-1b", "measured_s": 1.153, "predicted_s": 1.1460396337995633},
        {"id": "megatron20-dgxa100-tp2-2b", "measured_s": 1.026, "predicted_s": 1.0380393870871054},
        {"id": "megatron20-dgx2v100-tp2-2b", "measured_s": 1.093, "predicted_s": 1.1111413777338661},
        {"id": "megatron20-dgxa100-dp128-tp2-2b", "measured_s": 1.101, "predicted_s": 1.0828869688371054},
        {"id": "megatron20-dgxa100-tp4-4b", "measured_s": 1.162, "predicted_s": 1.1516725547043827},
        {"id": "megatron20-dgx2v100-tp4-4b", "measured_s": 1.238, "predicted_s": 1.2377801805800122},
        {"id": "megatron20-dgxa100-dp128-tp4-4b", "measured_s": 1.242, "predicted_s": 1.2428461607043828},
        {"id": "megatron20-dgxa100-tp8-8b", "measured_s": 1.343, "predicted_s": 1.311592166240237},
        {"id": "megatron20-dgx2v100-tp8-8b", "measured_s": 1.407, "predicted_s": 1.4077423197227736},
        {"id": "megatron20-dgxa100-dp128-tp8-8b", "measured_s": 1.38, "predicted_s": 1.4958346982402368},
    ],
    "mean_abs_error_pct": 4.816,
    "inputs_sha256": "a1264fd36daa89a43a9d98d9b9319ab7ea8909e318d5c4e6f47b1f51741a0854",
    "code_version": {
        "simulator": "0.4.0",
        "git_commit": "af3a918c2b385052a06dab196274938664b49fe1-dirty",
    },
}
