"""Chapter 11 -- GPT.

Load Hugging Face GPT-2 weights into the course GPT, to show the two are the same model.

GPT-2 in ``transformers`` stores its projections in ``Conv1D`` modules whose weight is
(in_features, out_features) -- the transpose of ``nn.Linear``'s -- so those are transposed on the
way in. Its default activation ``gelu_new`` is the tanh approximation of GELU.
"""

from __future__ import annotations

import torch

from mini_llm.gpt import GPT, GPTConfig

_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}

# Course name -> GPT-2 name for each block's tensors; True where GPT-2 stores the transpose.
_BLOCK_TENSORS = {
    "ln_1.weight": ("ln_1.weight", False),
    "ln_1.bias": ("ln_1.bias", False),
    "attn.qkv.weight": ("attn.c_attn.weight", True),
    "attn.qkv.bias": ("attn.c_attn.bias", False),
    "attn.proj.weight": ("attn.c_proj.weight", True),
    "attn.proj.bias": ("attn.c_proj.bias", False),
    "ln_2.weight": ("ln_2.weight", False),
    "ln_2.bias": ("ln_2.bias", False),
    "mlp.fc.weight": ("mlp.c_fc.weight", True),
    "mlp.fc.bias": ("mlp.c_fc.bias", False),
    "mlp.proj.weight": ("mlp.c_proj.weight", True),
    "mlp.proj.bias": ("mlp.c_proj.bias", False),
}


def config_from_hf(hf_config) -> GPTConfig:
    """The course config of a ``transformers.GPT2Config``; an error for features it lacks."""
    unsupported = {
        "activation_function": hf_config.activation_function not in _ACTIVATIONS,
        "scale_attn_weights=False": not hf_config.scale_attn_weights,
        "scale_attn_by_inverse_layer_idx": hf_config.scale_attn_by_inverse_layer_idx,
        "n_inner other than 4·n_embd": hf_config.n_inner not in (None, 4 * hf_config.n_embd),
        "untied output head": not getattr(hf_config, "tie_word_embeddings", True),
    }
    found = [name for name, present in unsupported.items() if present]
    if found:
        raise ValueError(f"this GPT-2 config uses what the course GPT does not have: {found}")
    return GPTConfig(
        vocab_size=hf_config.vocab_size,
        block_size=hf_config.n_positions,
        n_layer=hf_config.n_layer,
        n_head=hf_config.n_head,
        n_embd=hf_config.n_embd,
        dropout=0.0,
        bias=True,
        activation=_ACTIVATIONS[hf_config.activation_function],
        layer_norm_eps=hf_config.layer_norm_epsilon,
    )


def state_dict_from_hf(hf_state: dict[str, torch.Tensor], n_layer: int) -> dict[str, torch.Tensor]:
    """Rename (and transpose where needed) a GPT2LMHeadModel state dict for the course GPT."""
    ours = {
        "token_embedding.weight": hf_state["transformer.wte.weight"],
        "position_embedding.weight": hf_state["transformer.wpe.weight"],
        "ln_f.weight": hf_state["transformer.ln_f.weight"],
        "ln_f.bias": hf_state["transformer.ln_f.bias"],
    }
    for layer in range(n_layer):
        for our_name, (hf_name, transposed) in _BLOCK_TENSORS.items():
            tensor = hf_state[f"transformer.h.{layer}.{hf_name}"]
            ours[f"blocks.{layer}.{our_name}"] = tensor.t() if transposed else tensor
    ours["head.weight"] = ours["token_embedding.weight"]
    return ours


def from_hf_gpt2(hf_model) -> GPT:
    """A course GPT (fp32, on CPU) holding the weights of ``hf_model`` (a GPT2LMHeadModel)."""
    config = config_from_hf(hf_model.config)
    model = GPT(config)
    hf_state = {
        name: tensor.detach().float().cpu() for name, tensor in hf_model.state_dict().items()
    }
    model.load_state_dict(state_dict_from_hf(hf_state, config.n_layer))
    return model
