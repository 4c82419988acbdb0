"""Interoperability with the tools training engineers already run: a Hugging Face config.json, a Megatron-LM
argument list or log, in (as a request), and the launch arguments of Megatron-LM or a torchtitan TOML out (from a
request's layout). Pure functions on documents: no simulator here. Imports only api_schemas; service calls it."""

from interop.hf import ARCHITECTURES, HfModel, model_from_hf

__all__ = ["ARCHITECTURES", "HfModel", "model_from_hf"]
