"""Megatron-LM in and out: the Llama-3-8B FP8 example's command line imports to the run it describes, a log's
arguments block imports the same, bad input names the line, and every exported flag is Megatron-LM's own."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from api_schemas import RequestError, SimulationRequest
from interop.megatron_args import megatron_flags, parse_megatron
from service.interop import export_config, import_config

DATA = Path(__file__).parent / "data"
ARGS = DATA / "train_llama3_8b_h100_fp8.args"


def test_the_stored_command_line_is_what_the_example_script_runs(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    (tmp_path / "pretrain_gpt.py").write_text("")
    run = subprocess.run(["bash", "-c", 'torchrun() { printf "%s\\n" "torchrun $*"; }; export -f torchrun; '
                          f'bash {DATA / "train_llama3_8b_h100_fp8.sh"}'], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    stored = [line for line in ARGS.read_text().splitlines() if not line.startswith("#")]
    assert run.stdout.replace(f"{tmp_path}/", "").splitlines() == stored


def test_llama3_8b_fp8_example_imports_to_its_run() -> None:
    imported = import_config("megatron", ARGS.read_text(), str(ARGS))
    model, layout, cluster = (imported.request[k] for k in ("model", "layout", "cluster"))
    assert (layout["tp"], layout["cp"], layout["pp"], layout["dp"]) == (1, 1, 1, 8)
    assert (layout["microbatch_size"], layout["global_batch_size"]) == (1, 128)
    assert (model["num_layers"], model["hidden_size"], model["ffn_hidden_size"]) == (32, 4096, 14336)
    assert (model["num_attention_heads"], model["num_kv_heads"], model["head_dim"]) == (32, 8, 128)
    assert (model["seq_length"], model["vocab_size"], model["activation"]) == (8192, 128256, "swiglu")
    assert (layout["precision"], layout["fp8_recipe"]) == ("fp8", "tensorwise")  # --fp8-format hybrid, delayed
    assert (layout["zero_stage"], layout["overlap_grad_reduce"]) == (1, True)  # --use-distributed-optimizer
    assert layout["grad_reduce_dtype"] == "bf16" and "grad_reduce_in_bf16" not in imported.ignored
    assert cluster == {"preset": "dgx-h100", "num_gpus": 8}
    assert imported.ignored["overlap_param_gather"] == "True"  # listed with its value, not dropped
    assert imported.ignored["lr"] == "0.00015"
    SimulationRequest.model_validate(imported.request)


def test_a_log_arguments_block_imports_like_the_command_line() -> None:
    # The block as megatron/training/arguments.py's _print_args prints it (48 - len(name) dots).
    values = {"num_layers": 32, "hidden_size": 4096, "ffn_hidden_size": 14336, "num_attention_heads": 32,
              "group_query_attention": True, "num_query_groups": 8, "kv_channels": 128, "seq_length": 8192,
              "vocab_size": 128256, "swiglu": True, "untie_embeddings_and_output_weights": True,
              "attention_backend": "AttnBackend.fused", "tensor_model_parallel_size": 1,
              "pipeline_model_parallel_size": 1, "context_parallel_size": 1, "micro_batch_size": 1,
              "global_batch_size": 128, "use_distributed_optimizer": True, "overlap_grad_reduce": True,
              "fp8": "hybrid", "fp8_recipe": "delayed", "bf16": True, "world_size": 8, "sequence_parallel": False,
              "recompute_granularity": None, "num_experts": None, "lr": 0.00015,
              # as validate_args leaves them for --bf16 --grad-reduce-in-bf16 (main_grads_dtype mapped to torch's)
              "grad_reduce_in_bf16": True, "accumulate_allreduce_grads_in_fp32": False,
              "main_grads_dtype": "torch.float32", "fp8_param_gather": True}
    lines = [f"[rank0]:   {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(values.items())]
    log = "\n".join(["starting", "------------------------ arguments ------------------------", *lines,
                     "-------------------- end of arguments ---------------------", "building GPT model ..."])
    from_log = import_config("megatron", log, "train.log")
    from_args = import_config("megatron", ARGS.read_text(), str(ARGS))
    assert from_log.request == from_args.request
    assert from_log.ignored == {"lr": "0.00015", "world_size": "8"}


def test_every_exported_flag_is_megatrons_own() -> None:
    imported = import_config("megatron", ARGS.read_text(), str(ARGS))
    command = export_config("megatron", SimulationRequest.model_validate(imported.request))
    flags = [word for word in command.split() if word.startswith("--")]
    assert flags and set(flags[2:]) <= megatron_flags()  # the first two are torchrun's
    assert "--fp8-format" in flags and "--use-distributed-optimizer" in flags


@pytest.mark.parametrize("line, rule", [
    ("pretrain_gpt.py --num-layers 2 --tensor-parallel 2", "--tensor-parallel is not a Megatron-LM flag"),
    ("pretrain_gpt.py --hidden-size 8 --num-attention-heads 2 --num-layers two", "must be an integer"),
    ("pretrain_gpt.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --vocab-size 8 "
     "--recompute-granularity full --recompute-method block --recompute-num-layers 1", "recomputes only part"),
])
def test_bad_arguments_name_the_line_and_flag(line: str, rule: str) -> None:
    with pytest.raises(RequestError) as err:
        import_config("megatron", "# a comment\n" + line + "\n", "run.sh", nodes=1)
    assert err.value.details[0].field == "run.sh:2"
    assert rule in err.value.details[0].rule


def test_unrunnable_layouts_name_the_framework_that_can() -> None:
    base = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1}}
    zero3 = SimulationRequest.model_validate({**base, "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 8,
                                                                 "zero_stage": 3}})
    with pytest.raises(RequestError, match="DeepSpeed can") as err:
        export_config("megatron", zero3)
    assert err.value.details[0].field == "layout.zero_stage"
    gpipe = SimulationRequest.model_validate({**base, "layout": {"dp": 4, "tp": 1, "pp": 2, "global_batch_size": 8,
                                                                 "schedule": "gpipe"}})
    with pytest.raises(RequestError, match="torchtitan can"):
        export_config("megatron", gpipe)


def test_parse_keeps_values_and_lines() -> None:
    args = parse_megatron("torchrun --nproc_per_node 4 --nnodes 2 pretrain_gpt.py \\\n  --num-layers 4 \\\n"
                          "  --no-gradient-accumulation-fusion --moe-layer-freq '([0]*1+[1]*3)'\n")
    assert args.world_size == 8
    assert args.values == {"num_layers": "4", "gradient_accumulation_fusion": "False",
                           "moe_layer_freq": "([0]*1+[1]*3)"}
    assert args.lines == {"num_layers": 2, "gradient_accumulation_fusion": 3, "moe_layer_freq": 3}


def test_mixtral_example_imports_to_the_mixtral_preset_shape() -> None:
    # Megatron-LM's examples/mixtral script, expanded: its vocabulary comes from the tokenizer, which a command
    # line does not say, so the import asks for it by name; given (Mixtral's 32000), the model is the preset's.
    text = (DATA / "train_mixtral_8x7b_distributed.args").read_text()
    with pytest.raises(RequestError, match="--vocab-size: is required"):
        import_config("megatron", text, "mixtral.args", nodes=4)
    imported = import_config("megatron", text.rstrip() + " --vocab-size 32000\n", "mixtral.args", nodes=4)
    layout = imported.request["layout"]
    assert (layout["pp"], layout["ep"], layout["dp"], layout["zero_stage"]) == (4, 8, 8, 1)
    request = SimulationRequest.model_validate(imported.request)
    preset = SimulationRequest.model_validate({**imported.request, "model": {
        "preset": "mixtral-8x7b", "seq_length": 4096, "activation": "swiglu"}})
    from service import convert

    ours, theirs = convert.to_scenario(request).model, convert.to_scenario(preset).model
    assert (ours.num_layers, ours.hidden_size, ours.ffn_hidden_size, ours.num_kv_heads) == (
        theirs.num_layers, theirs.hidden_size, theirs.ffn_hidden_size, theirs.num_kv_heads)
    assert (ours.moe, ours.vocab_size, ours.seq_length) == (theirs.moe, theirs.vocab_size, theirs.seq_length)
