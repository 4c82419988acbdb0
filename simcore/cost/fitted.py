"""The fitted cost-model parameters and the record of the fit that produced them.

Written by `python bench/fit_cost_model.py` (simcore/calibration/fit.py); do not edit by hand:
tests/simcore/calibration/test_fitted_parameters.py fails when this is not what the fit gives on the
current code.
"""

from typing import Any

FIT: dict[str, Any] = {
    "parameters": {
        "gemm_efficiency_volta": 0.761,
        "gemm_efficiency_ampere": 0.65,
        "gemm_efficiency_hopper": 0.62,
        "gemm_half_time_volta_s": 8.39e-05,
        "gemm_half_time_ampere_s": 1.03e-05,
        "gemm_half_time_hopper_s": 9.89e-06,
        "memory_efficiency": 0.821,
        "host_iteration_s": 0.0284,
        "comm_sm_share": 0.0,
    },
    "fitted_sources": ["megatron20", "mcore24"],
    "rows": [
        {"id": "mcore24-h100-weak-1.7b", "measured_s": 0.452, "predicted_s": 0.3739732989256402},
        {"id": "mcore24-h100-weak-7.1b", "measured_s": 0.8, "predicted_s": 0.6833465656222593},
        {"id": "mcore24-h100-weak-16b", "measured_s": 0.85, "predicted_s": 0.831895306009953},
        {"id": "mcore24-h100-weak-32b", "measured_s": 0.892, "predicted_s": 1.0737415139069513},
        {"id": "mcore24-h100-weak-70b", "measured_s": 2.177, "predicted_s": 2.2292110107085974},
        {"id": "mcore24-h100-weak-119b", "measured_s": 3.648, "predicted_s": 3.5736890174748006},
        {"id": "mcore24-h100-weak-177b", "measured_s": 5.259, "predicted_s": 5.20775018300741},
        {"id": "mcore24-h100-weak-314b", "measured_s": 8.399, "predicted_s": 8.946807596024081},
        {"id": "mcore24-h100-weak-462b", "measured_s": 12.716, "predicted_s": 13.211828212071397},
        {"id": "megatron20-dgxa100-tp1-1b", "measured_s": 1.076, "predicted_s": 1.1290548589994631},
        {"id": "megatron20-dgx2v100-tp1-1b", "measured_s": 1.121, "predicted_s": 1.1890655040527371},
        {"id": "megatron20-dgxa100-dp128-tp1-1b", "measured_s": 1.153, "predicted_s": 1.1539784814994631},
        {"id": "megatron20-dgxa100-tp2-2b", "measured_s": 1.026, "predicted_s": 1.0452506208087762},
        {"id": "megatron20-dgx2v100-tp2-2b", "measured_s": 1.093, "predicted_s": 1.1114594240683893},
        {"id": "megatron20-dgxa100-dp128-tp2-2b", "measured_s": 1.101, "predicted_s": 1.0881514425587764},
        {"id": "megatron20-dgxa100-tp4-4b", "measured_s": 1.162, "predicted_s": 1.1565701213110104},
        {"id": "megatron20-dgx2v100-tp4-4b", "measured_s": 1.238, "predicted_s": 1.236654561692301},
        {"id": "megatron20-dgxa100-dp128-tp4-4b", "measured_s": 1.242, "predicted_s": 1.2455881673110105},
        {"id": "megatron20-dgxa100-tp8-8b", "measured_s": 1.343, "predicted_s": 1.3100012656430107},
        {"id": "megatron20-dgx2v100-tp8-8b", "measured_s": 1.407, "predicted_s": 1.4003822577616205},
        {"id": "megatron20-dgxa100-dp128-tp8-8b", "measured_s": 1.38, "predicted_s": 1.4904768376430109},
    ],
    "mean_abs_error_pct": 4.657,
    "inputs_sha256": "a1264fd36daa89a43a9d98d9b9319ab7ea8909e318d5c4e6f47b1f51741a0854",
    "code_version": {
        "simulator": "0.1.0",
        "git_commit": "39b49b013587ee5bf9ba106eed8c5486dac0fce3",
    },
}
