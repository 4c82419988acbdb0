"""`clustersim calibrate`'s readers on real outputs: nccl-tests tables posted publicly (tests/interop/data/nccl-tests,
SOURCES.md says where each came from) give their ranks, nodes, sizes and out-of-place and in-place time and bus
bandwidth; a file without a table, a row that does not fit its header or a run without MPI names the line; GEMM
sweeps as CSV and as MAMF-finder's log rows (the print formats of its source, versions 1-3 and 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from api_schemas import RequestError
from interop.gemm_sweep import parse_gemm_sweep
from interop.nccl_tests import parse_nccl_tests

DATA = Path(__file__).parent / "data" / "nccl-tests"


def _table(name: str) -> dict:
    path = DATA / name
    return parse_nccl_tests(path.read_text(), str(path))


def test_a3_mega_two_nodes_of_eight_h100() -> None:
    t = _table("a3mega-h100-2x8-all_reduce.txt")
    assert (t["collective"], t["ranks"], t["nodes"], t["gpu"]) == ("all_reduce", 16, 2, "NVIDIA H100 80GB HBM3")
    sizes = [p["size_bytes"] for p in t["points"]]
    assert sizes == [8 * 2**i for i in range(31)]  # -b 8 -e 8G -f 2
    assert t["points"][-1] == {"size_bytes": 8589934592, "time_us": 47535.0, "busbw_gb_per_s": 338.82,
                               "in_place_time_us": 47743.0, "in_place_busbw_gb_per_s": 337.35}
    # nccl-tests' busbw = size / time x 2(n-1)/n (src/all_reduce.cu), to its two printed decimals
    for p in t["points"][20:]:
        assert p["busbw_gb_per_s"] == pytest.approx(p["size_bytes"] / (p["time_us"] * 1e3) * 2 * 15 / 16, abs=0.01)


@pytest.mark.parametrize("name, ranks, nodes, time_us, busbw", [
    ("oci-a100-1x8-all_reduce.txt", 8, 1, 80922.0, 232.20),
    ("oci-a100-2x8-all_reduce.txt", 16, 2, 104989.0, 191.76),
])
def test_oci_a100_one_size_runs(name: str, ranks: int, nodes: int, time_us: float, busbw: float) -> None:
    t = _table(name)
    assert (t["ranks"], t["nodes"], t["gpu"]) == (ranks, nodes, "NVIDIA A100-SXM4-40GB")
    assert t["points"] == [{"size_bytes": 10737418240, "time_us": time_us, "busbw_gb_per_s": busbw,
                            "in_place_time_us": pytest.approx(time_us, rel=0.01),
                            "in_place_busbw_gb_per_s": pytest.approx(busbw, rel=0.01)}]


def test_a_file_without_a_table_names_the_line_after_the_ranks() -> None:
    text = "\n".join(ln for ln in (DATA / "oci-a100-1x8-all_reduce.txt").read_text().splitlines()
                     if "Rank" in ln or "all_reduce_perf" in ln)
    with pytest.raises(RequestError) as err:
        parse_nccl_tests(text, "run.txt")
    assert err.value.details[0].field == "run.txt:11"  # the command, the start marker, 8 rank lines, then nothing
    assert "no nccl-tests table" in err.value.details[0].rule


def test_a_row_that_does_not_fit_its_header_names_its_line() -> None:
    lines = (DATA / "oci-a100-1x8-all_reduce.txt").read_text().splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.strip().startswith("10737418240"))
    lines[row] = lines[row].rsplit(maxsplit=2)[0]
    with pytest.raises(RequestError) as err:
        parse_nccl_tests("\n".join(lines), "run.txt")
    assert err.value.details[0].field == f"run.txt:{row + 1}"
    assert "columns under a header of 13" in err.value.details[0].rule


def test_ranks_listed_twice_say_the_build_lacked_mpi() -> None:
    text = (DATA / "oci-a100-1x8-all_reduce.txt").read_text().replace("Rank  1 ", "Rank  0 ")
    with pytest.raises(RequestError, match="MPI=1"):
        parse_nccl_tests(text, "run.txt")


def test_the_collective_comes_from_the_file_name_when_the_text_does_not_say() -> None:
    text = "\n".join(ln for ln in (DATA / "a3mega-h100-2x8-all_reduce.txt").read_text().splitlines()
                     if "all_reduce_perf" not in ln)
    assert parse_nccl_tests(text, "/tmp/reduce_scatter.log")["collective"] == "reduce_scatter"
    with pytest.raises(RequestError, match="cannot tell which collective"):
        parse_nccl_tests(text, "/tmp/run.log")


def test_gemm_csv_and_its_errors() -> None:
    sweep = parse_gemm_sweep("m,n,k,dtype,tflops\n4096,4096,4096,bf16,700.5\n8192, 8192, 8192, float8_e4m3fn, 1400\n",
                             "gemm.csv")
    assert sweep["points"] == [{"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 700.5},
                               {"m": 8192, "n": 8192, "k": 8192, "dtype": "fp8", "tflops": 1400.0}]
    with pytest.raises(RequestError) as err:
        parse_gemm_sweep("m,n,k,dtype,tflops\n1,2,3,float32,10\n", "gemm.csv")
    assert err.value.details[0].field == "gemm.csv:2" and "float32" in err.value.details[0].rule
    with pytest.raises(RequestError) as err:
        parse_gemm_sweep("m,n,k,tflops\n1,2,3,10\n", "gemm.csv")
    assert err.value.details[0].field == "gemm.csv:1" and "dtype" in err.value.details[0].rule


def test_mamf_finder_rows_of_both_formats() -> None:
    # Rows as mamf-finder.py prints them (stas00/ml-engineering compute/accelerator/benchmarks/mamf-finder.py):
    # v1-3 `{n:>6} | {mean:6.1f}(mean) {median:6.1f}(median) {max:6.1f}(max) @ {MxNxK:<20} | best: ...` joined by
    # carriage returns, v4 `{n:>6}  {MxNxK:<18} {mean:6.1f} {median:6.1f} {max:6.1f} {best:6.1f}`.
    v3 = ("python mamf-finder.py --m_range 1024 2048 1024 --n 4096 --k 4096 --dtype float16\n"
          "     1 |  650.1(mean)  651.0(median)  660.2(max) @ 1024x4096x4096         | best:  650.1(mean)  "
          "651.0(median)  660.2(max) TFLOPS\r"
          "     2 |  702.3(mean)  703.0(median)  710.0(max) @ 2048x4096x4096         | best:  "
          "702.3(mean)  703.0(median)  710.0(max) TFLOPS\r\n")
    assert parse_gemm_sweep(v3, "mm.out")["points"] == [
        {"m": 1024, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 650.1},
        {"m": 2048, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 702.3}]
    v4 = ("     #  MxNxK                mean median    max   best\n"
          "     1  4096x4096x4096      712.9  713.4  718.0  712.9\r"
          "     2  4096x4096x4096      715.0  716.0  720.0  715.0\n")
    assert parse_gemm_sweep(v4, "mm.out")["points"] == [
        {"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 715.0}]
    with pytest.raises(RequestError, match="no GEMM rows"):
        parse_gemm_sweep("nothing here\n", "mm.out")
