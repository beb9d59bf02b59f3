"""Small valid commands shared by the every-verb tests (``test_hostile_inputs.py``,
``test_output_width.py``): each file adds the flags its own check needs."""

from __future__ import annotations

#: A serving run small enough for a test: Llama-3.1-8B on one Trn2 instance at TP8.
SERVE_SMALL = ["serve", "--model", "llama-3.1-8b", "--system", "trn2.48xlarge", "--tp", "8"]
#: The tiny transformer of the torch verbs: one layer, 8 tokens, d_model 32.
TINY_TORCH = ["--layers", "1", "--seq-len", "8", "--d-model", "32"]
#: The torch verbs' tiny runs, without the flags each test varies.
TORCH_PROFILE_SMALL = ["torch-profile", "--mode", "shapes", *TINY_TORCH, "--no-files"]
TORCH_DEMO_FLAGS = [*TINY_TORCH, "--batch", "1", "--formats", "fp32,mxfp8", "--no-png"]
