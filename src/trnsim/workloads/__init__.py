"""trnsim.workloads: model architectures as data (dense and MoE transformers) and their op
graphs with FLOPs and element counts. Knows nothing of hardware or parallelism."""

from trnsim.workloads.graph import (
    Graph,
    LayerGroup,
    Op,
    SeqGroup,
    attention_op,
    attention_pairs,
    expected_experts_touched,
    forward_graph,
    step_graph,
    train_flops_per_token,
)
from trnsim.workloads.hf_config import resolve_model
from trnsim.workloads.transformer import (
    MODELS,
    MLAArgs,
    ModelArgs,
    eagle3_head,
    model,
    mtp_module,
)

__all__ = [
    "MODELS",
    "Graph",
    "LayerGroup",
    "MLAArgs",
    "ModelArgs",
    "Op",
    "SeqGroup",
    "attention_op",
    "attention_pairs",
    "eagle3_head",
    "expected_experts_touched",
    "forward_graph",
    "model",
    "mtp_module",
    "resolve_model",
    "step_graph",
    "train_flops_per_token",
]
