"""The repository's benchmarks and documentation tooling: scripts that print figures or write the generated blocks
of the documentation from the current code. Not part of the product (setuptools ships the packages of
pyproject.toml, not bench/); run from the repository root, either way:  python bench/X.py  or  python -m bench.X.
A script run by its path puts the repository root on the import path first (its `__spec__ is None` guard), so that
it imports its siblings as this package (`from bench.generated import ...`) in both ways; the example scripts
(examples/*/*.py) do the same. The tests load these modules through tests/bench_scripts.py.

- accuracy_table.py: the documentation's accuracy table, from `clustersim validate --json`.
- admission.py: how true the service's admission estimate is on generated requests.
- compiled_engine.py: what compiling the event engine with mypyc would buy.
- doc_sections.py: where the documentation (README.md, docs/) keeps a section or a generated block, and writing one.
- dp_scaling_speed.py: simulation cost against the data-parallel size.
- engine_ab.py: A/B speed of two source trees on the same requests.
- fit_cost_model.py: fit the cost model's free parameters and write simcore/cost/fitted.py.
- fit_fp8.py: fit FP8_GEMM_EFFICIENCY_RATIO on the BF16/FP8 step-time ratios.
- fit_moe.py: fit MOE_HOST_KERNEL_S on the MoE calibration rows.
- fit_zero3_host.py: fit HOST_OP_2021_S on the two ZeRO 3 rows of Narayanan et al. 2021.
- fuzz.py: a seeded mutation fuzzer of the HTTP service.
- generated.py: files written from figures the code computes: write them, or check that they are current.
- golden_results.py: the golden results: a fixed set of requests simulated, their result JSON written or compared.
- graph_cost.py: what the cluster's networkx graph costs a simulation.
- hostile_bodies.py: hostile request bodies against a live server.
- load_test.py: load test of the HTTP service (and its helpers: a server on a free port, percentiles).
- mlperf_results.py: write the published MLPerf Training LLM runs from the MLCommons results repositories.
- mlperf_table.py: the documentation's MLPerf table, from the MLPerf part of `clustersim validate`.
- nccl_curve.py: NCCL's algorithm choice against the measured all-reduce curve of collectives.json.
- orphan_workers.py: whether a search's worker processes end with it.
- picture_load.py: pictures of a large job under load.
- readme_checks.py: the documentation's generated figures other than an example's or the accuracy table.
- readme_search.py: the search results quoted in the documentation.
- regenerate.py: regenerate every figure the repository ships, in dependency order.
- search_admission.py: how good the estimate a search is admitted by is.
- search_exhaustive.py: the exhaustive best of a search space, proven by ceilings no simulation can beat.
- search_proof.py: how fast the search proves its answer, and whether it is the exhaustive one.
- search_quality.py: how good the search's screen is.
- search_speed.py: simulated search candidates per minute.
- shell_config.py: the variables a submission's config script sets, its simple `if` conditions evaluated.
- speed_1t.py: wall time, CPU time and event count of the 1T GPT on 3072 A100s.
- startup.py: whole-process speed of the command line.
- zero3_bounds.py: how far DeepSpeed's gather schedule can explain the ZeRO++ sweep's ZeRO-3 rows.
- zeropp_speedups.py: the ZeRO++ blog's ZeRO++/ZeRO-3 speedups, published and simulated, per network and tokens.
- zero_bubble.py: the Zero Bubble paper's setups against the simulated per-stage times.
"""
