"""Known-buggy answers to the ch13_vision_transformer exercise: mistakes learners really make.

Same layout as ``ch11_gpt.py``: each function or class carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the
notebook must fail every one of them while the reference passes. ``ALTERNATIVES`` (at the end)
holds correct answers written differently, which the hidden tests must accept.

Cutting an image into patches is a reshape and a permutation, and most mistakes are in the
permutation: a plain reshape (strips of a row, not squares), the patches read top to bottom,
a patch flattened column by column or with the channels interleaved pixel by pixel, height and
width swapped (which only a non-square image shows), one channel kept, the last row and column
of patches lost to an off-by-one range, a float32 buffer; and, in refusing a patch size that
does not divide the image, a silent crop, a check of the height only, an ``assert``. The
inverse has the same ones the other way round. In the patch embedding: the class token put
last, or in front after the positions were added (so it has none), not expanded to the batch,
not learned (a fresh zero tensor, or a plain tensor attribute that is no parameter), the
positions a buffer or only as many as the patches, the projection without its bias or blind
to the channels, patches cut by a reshape. In the head: the mean or the last token instead of
the class token, no LayerNorm, a LayerNorm after the linear layer, over the tokens, without its
gain and bias or with the unbiased variance, probabilities instead of scores, the first image's
tokens instead of every image's first token.

Nothing here calls the package's version of a part of this notebook at run time (when the
notebook is graded, those are withheld from answers): the patch embedding cuts its patches with
``_patchify``, written again.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm import vit
from mini_llm.transformer import LayerNorm

from ._registry import new_registry

REFERENCE = ("mini_llm.vit",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()


# -------------------------------------------------------------------------------------- patchify


def _patchify(images, patch_size, *, order=(0, 2, 4, 1, 3, 5), swap=False, check="both"):
    """The right patches; knobs: the ``order`` of the axes (B, rows, p, cols, p split of C, H,
    W) before the last reshape, height and width read the wrong way round (``swap``), and
    which sizes are ``check``-ed ("both", "height", "none": crop silently, "assert")."""
    if images.dim() == 3:
        images = images.unsqueeze(1)
    B, C, H, W = images.shape
    if swap:
        W, H = H, W
    p = patch_size
    if check == "both" and (H % p or W % p):
        raise ValueError(f"patch_size={p} must divide the image size {H}x{W}")
    if check == "height" and H % p:
        raise ValueError(f"patch_size={p} must divide the height {H}")
    if check == "assert":
        assert H % p == 0 and W % p == 0, "patch_size must divide the image size"
    if check in ("none", "height"):
        images = images[..., : H - H % p, : W - W % p]
        H, W = H - H % p, W - W % p
    grid = images.reshape(B, C, H // p, p, W // p, p)
    return grid.permute(*order).reshape(B, (H // p) * (W // p), C * p * p)


# First the mistake only a non-square image shows: plain nbgrader grades the patch embedding
# (square images only) with the learner's own patchify, and tests/test_autograde.py hands in
# the first bug of a part that gets past the visible tests.
patchify_bug = bug.variants("patchify", _patchify, like=vit.patchify)
patchify_bug(
    "height_width_swapped",
    "B, C, W, H = images.shape: the grid of a non-square image cut along the wrong sides",
    swap=True,
)
patchify_bug(
    "column_major_patches",
    "the patches read top to bottom, then left to right: permute(0, 4, 2, ...), not (0, 2, 4, ...)",
    order=(0, 4, 2, 1, 3, 5),
)
patchify_bug(
    "channels_interleaved",
    "each patch flattened pixel by pixel with its channels together (channels last), "
    "not channel by channel",
    order=(0, 2, 4, 3, 5, 1),
)
patchify_bug(
    "patch_by_columns",
    "each patch flattened column by column: the two pixel axes of a patch swapped",
    order=(0, 2, 4, 1, 5, 3),
)


@bug(
    "patchify", "reshape_without_permute", "images.reshape(B, N, C·p·p): strips of rows, no squares"
)
def _(images, patch_size):
    if images.dim() == 3:
        images = images.unsqueeze(1)
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError("patch_size must divide the image size")
    return images.reshape(B, (H // p) * (W // p), C * p * p)


@bug("patchify", "first_channel_only", "images[:, 0]: the patches of the first channel only")
def _(images, patch_size):
    if images.dim() == 4:
        images = images[:, 0]
    return _patchify(images, patch_size)


@bug(
    "patchify",
    "last_row_and_column_lost",
    "range(0, H - p, p) in a loop over the grid: the last row and column of patches left out",
)
def _(images, patch_size):
    if images.dim() == 3:
        images = images.unsqueeze(1)
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError("patch_size must divide the image size")
    patches = [
        images[:, :, r : r + p, c : c + p].reshape(B, C * p * p)
        for r in range(0, H - p, p)
        for c in range(0, W - p, p)
    ]
    if not patches:
        return images.new_zeros(B, 0, C * p * p)
    return torch.stack(patches, dim=1)


@bug("patchify", "no_channel_axis", "B, C, H, W = images.shape: a (B, H, W) batch not accepted")
def _(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError("patch_size must divide the image size")
    grid = images.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return grid.reshape(B, (H // p) * (W // p), C * p * p)


@bug(
    "patchify",
    "float32_buffer",
    "the patches copied into torch.zeros(B, N, C·p·p): float64 images give float32 patches",
)
def _(images, patch_size):
    if images.dim() == 3:
        images = images.unsqueeze(1)
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError("patch_size must divide the image size")
    cols = W // p
    out = torch.zeros(B, (H // p) * cols, C * p * p)
    for r in range(H // p):
        for c in range(cols):
            out[:, r * cols + c] = images[:, :, r * p : (r + 1) * p, c * p : (c + 1) * p].reshape(
                B, -1
            )
    return out


bug.input("patchify", "silent_crop", "no check: H // p patches a side, the rest cropped away")(
    lambda images, patch_size: _patchify(images, patch_size, check="none")
)
bug.input(
    "patchify", "height_only", "only the height checked: a width p does not divide is cropped"
)(lambda images, patch_size: _patchify(images, patch_size, check="height"))
bug.input("patchify", "assert", "assert instead of raise ValueError: AssertionError")(
    lambda images, patch_size: _patchify(images, patch_size, check="assert")
)


# ------------------------------------------------------------------------------------ unpatchify


def _unpatchify(
    patches, patch_size, height, width, *, order=(0, 3, 1, 4, 2, 5), split="CPP", check="both"
):
    """The right images; knobs: the ``order`` of (B, rows, cols, C, p, p) before the last
    reshape, the layout a patch vector is ``split`` into ("CPP", channels last "PPC", "cols
    first"), and which sizes are ``check``-ed ("both", "count", "none", "assert",
    "square": the grid taken as height // p on both sides)."""
    B, N, D = patches.shape
    p = patch_size
    rows, cols = height // p, width // p
    if check == "square":
        cols = rows
    if check in ("both", "square") and (rows * cols != N or D % (p * p)):
        raise ValueError("the patches do not tile the image")
    if check == "count" and rows * cols != N:
        raise ValueError("the patches do not tile the image")
    if check == "assert":
        assert rows * cols == N and D % (p * p) == 0, "the patches do not tile the image"
    C = D // (p * p)
    if split == "PPC":
        grid = patches.reshape(B, rows, cols, p, p, C).permute(0, 1, 2, 5, 3, 4)
    elif split == "cols first":
        grid = patches.reshape(B, cols, rows, C, p, p).transpose(1, 2)
    else:
        grid = patches.reshape(B, rows, cols, C, p, p)
    return grid.permute(*order).reshape(B, C, height, width)


unpatchify_bug = bug.variants("unpatchify", _unpatchify, like=vit.unpatchify)
unpatchify_bug(
    "grid_read_column_first",
    "patches.reshape(B, cols, rows, ...): the grid filled column by column, not row by row",
    split="cols first",
)
unpatchify_bug(
    "square_grid_assumed",
    "rows = cols = height // p: the patches of a non-square image refused",
    check="square",
)
unpatchify_bug(
    "patchify_permutation_reused",
    "permute(0, 3, 1, 2, 4, 5), patchify's order again: (B, C, rows, cols, p, p) is not an image",
    order=(0, 3, 1, 2, 4, 5),
)
unpatchify_bug(
    "channels_interleaved",
    "each patch vector read as pixels with their channels together (channels last)",
    split="PPC",
)
unpatchify_bug(
    "pixels_transposed",
    "permute(0, 3, 1, 5, 2, 4): each patch put back transposed",
    order=(0, 3, 1, 5, 2, 4),
)


@bug(
    "unpatchify",
    "reshape_without_permute",
    "patches.reshape(B, C, H, W): rows of pixels, no squares",
)
def _(patches, patch_size, height, width):
    B, N, D = patches.shape
    p = patch_size
    if (height // p) * (width // p) != N or D % (p * p):
        raise ValueError("the patches do not tile the image")
    return patches.reshape(B, D // (p * p), height, width)


@bug("unpatchify", "channel_axis_squeezed", "one channel returned as (B, H, W), not (B, 1, H, W)")
def _(patches, patch_size, height, width):
    images = _unpatchify(patches, patch_size, height, width)
    return images[:, 0] if images.size(1) == 1 else images


bug.input("unpatchify", "no_check", "no check: the reshape's RuntimeError, not ValueError")(
    lambda patches, patch_size, height, width: _unpatchify(
        patches, patch_size, height, width, check="none"
    )
)
bug.input(
    "unpatchify",
    "count_only",
    "the number of patches checked, not their width: a RuntimeError for a width p·p does not divide",
)(
    lambda patches, patch_size, height, width: _unpatchify(
        patches, patch_size, height, width, check="count"
    )
)
bug.input("unpatchify", "assert", "assert instead of raise ValueError: AssertionError")(
    lambda patches, patch_size, height, width: _unpatchify(
        patches, patch_size, height, width, check="assert"
    )
)


# -------------------------------------------------------------------------------- PatchEmbedding


class _Embedding(nn.Module):
    """The right patch embedding (its layers, and a forward through ``_patchify``)."""

    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__()
        self.patch_size = patch_size
        n_patches = (image_size // patch_size) ** 2
        self.projection = nn.Linear(channels * patch_size**2, d_model)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.positions = nn.Parameter(0.02 * torch.randn(1, 1 + n_patches, d_model))

    def tokens(self, images):
        return self.projection(_patchify(images, self.patch_size))

    def forward(self, images):
        tokens = self.tokens(images)
        class_token = self.class_token.expand(tokens.shape[0], -1, -1)
        return torch.cat([class_token, tokens], dim=1) + self.positions


# First the mistake only a batch of several images shows (no other part uses this one).
@bug(
    "PatchEmbedding",
    "class_token_for_one_image",
    "torch.cat([self.class_token, tokens], 1) without expanding the class token to the batch",
)
class _(_Embedding):
    def forward(self, images):
        return torch.cat([self.class_token, self.tokens(images)], dim=1) + self.positions


@bug(
    "PatchEmbedding",
    "class_token_last",
    "torch.cat([tokens, class_token], 1): the class token last",
)
class _(_Embedding):
    def forward(self, images):
        tokens = self.tokens(images)
        class_token = self.class_token.expand(tokens.shape[0], -1, -1)
        return torch.cat([tokens, class_token], dim=1) + self.positions


@bug(
    "PatchEmbedding",
    "class_token_without_position",
    "positions[:, 1:] added to the patches, then the class token put in front with none",
)
class _(_Embedding):
    def forward(self, images):
        tokens = self.tokens(images) + self.positions[:, 1:]
        class_token = self.class_token.expand(tokens.shape[0], -1, -1)
        return torch.cat([class_token, tokens], dim=1)


@bug(
    "PatchEmbedding",
    "class_token_not_learned",
    "a fresh torch.zeros(B, 1, d) in front: the learned class_token never used",
)
class _(_Embedding):
    def forward(self, images):
        tokens = self.tokens(images)
        zeros = tokens.new_zeros(tokens.shape[0], 1, tokens.shape[2])
        return torch.cat([zeros, tokens], dim=1) + self.positions


@bug(
    "PatchEmbedding",
    "class_token_plain_tensor",
    "self.class_token = torch.zeros(..., requires_grad=True): no nn.Parameter, so no weight",
)
class _(_Embedding):
    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__(image_size, patch_size, d_model, channels)
        del self.class_token
        self.class_token = torch.zeros(1, 1, d_model, requires_grad=True)


@bug(
    "PatchEmbedding",
    "positions_buffer",
    "register_buffer('positions', ...): the positions not learned",
)
class _(_Embedding):
    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__(image_size, patch_size, d_model, channels)
        positions = self.positions.detach().clone()
        del self.positions
        self.register_buffer("positions", positions)


@bug(
    "PatchEmbedding",
    "positions_of_patches_only",
    "positions (1, N, d), one per patch: the class token gets none",
)
class _(_Embedding):
    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__(image_size, patch_size, d_model, channels)
        self.positions = nn.Parameter(self.positions.detach()[:, 1:].clone())

    def forward(self, images):
        tokens = self.tokens(images) + self.positions
        class_token = self.class_token.expand(tokens.shape[0], -1, -1)
        return torch.cat([class_token, tokens], dim=1)


@bug("PatchEmbedding", "projection_without_bias", "nn.Linear(C·p·p, d, bias=False)")
class _(_Embedding):
    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__(image_size, patch_size, d_model, channels)
        self.projection = nn.Linear(channels * patch_size**2, d_model, bias=False)


@bug("PatchEmbedding", "channels_ignored", "nn.Linear(p·p, d): only one channel's pixels per patch")
class _(_Embedding):
    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__(image_size, patch_size, d_model, 1)


@bug("PatchEmbedding", "patches_by_reshape", "the patches cut by images.reshape(B, N, C·p·p)")
class _(_Embedding):
    def tokens(self, images):
        if images.dim() == 3:
            images = images.unsqueeze(1)
        B, C, H, W = images.shape
        p = self.patch_size
        return self.projection(images.reshape(B, (H // p) * (W // p), C * p * p))


# ---------------------------------------------------------------------------- ClassificationHead


class _Head(nn.Module):
    """The layers of the right head."""

    def __init__(self, d_model, n_classes):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.linear = nn.Linear(d_model, n_classes)


# First the mistake only learned gains and biases show (no other part uses this one).
@bug(
    "ClassificationHead",
    "norm_without_gain_and_bias",
    "F.layer_norm(tokens[:, 0], (d,)): the norm's learned gain and bias never used",
)
class _(_Head):
    def forward(self, tokens):
        return self.linear(F.layer_norm(tokens[:, 0], tokens.shape[-1:]))


@bug("ClassificationHead", "mean_pooling", "the mean of all tokens classified, not the class token")
class _(_Head):
    def forward(self, tokens):
        return self.linear(self.norm(tokens.mean(dim=1)))


@bug("ClassificationHead", "last_token", "tokens[:, -1]: the last patch classified, as in a GPT")
class _(_Head):
    def forward(self, tokens):
        return self.linear(self.norm(tokens[:, -1]))


@bug("ClassificationHead", "no_layer_norm", "self.linear(tokens[:, 0]): the LayerNorm left out")
class _(_Head):
    def forward(self, tokens):
        return self.linear(tokens[:, 0])


@bug(
    "ClassificationHead",
    "norm_after_linear",
    "LayerNorm(n_classes) on the scores: self.norm(self.linear(tokens[:, 0]))",
)
class _(nn.Module):
    def __init__(self, d_model, n_classes):
        super().__init__()
        self.norm = LayerNorm(n_classes)
        self.linear = nn.Linear(d_model, n_classes)

    def forward(self, tokens):
        return self.norm(self.linear(tokens[:, 0]))


@bug(
    "ClassificationHead",
    "norm_over_tokens",
    "the LayerNorm's mean and variance taken over the tokens (axis 1), not the features",
)
class _(_Head):
    def forward(self, tokens):
        mean = tokens.mean(dim=1, keepdim=True)
        variance = ((tokens - mean) ** 2).mean(dim=1, keepdim=True)
        normed = (tokens - mean) / torch.sqrt(variance + 1e-5)
        return self.linear(self.norm.weight * normed[:, 0] + self.norm.bias)


@bug("ClassificationHead", "unbiased_variance", "a LayerNorm by hand with .var(): divided by d - 1")
class _(_Head):
    def forward(self, tokens):
        x = tokens[:, 0]
        normed = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)
        return self.linear(self.norm.weight * normed + self.norm.bias)


@bug(
    "ClassificationHead",
    "softmax_scores",
    "softmax of the scores returned: probabilities, not scores",
)
class _(_Head):
    def forward(self, tokens):
        return torch.softmax(self.linear(self.norm(tokens[:, 0])), dim=-1)


@bug(
    "ClassificationHead",
    "first_image_tokens",
    "tokens[0] (every token of the first image), not tokens[:, 0] (every image's class token)",
)
class _(_Head):
    def forward(self, tokens):
        return self.linear(self.norm(tokens[0]))


# ---------------------------------------------------------------------------------- alternatives


@correct("patchify", "tensor_unfold")
def _(images, patch_size):
    """Tensor.unfold along the height, then the width: (B, C, rows, cols, p, p)."""
    if images.ndim == 3:
        images = images[:, None]
    B, C, H, W = images.shape
    p = patch_size
    if H % p != 0 or W % p != 0:
        raise ValueError("patch_size must divide the height and the width")
    grid = images.unfold(2, p, p).unfold(3, p, p)
    return grid.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * p * p)


@correct("patchify", "functional_unfold")
def _(images, patch_size):
    """F.unfold (im2col) with a stride of one patch: (B, C·p·p, N), transposed."""
    if images.dim() == 3:
        images = images.unsqueeze(1)
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError("patch_size must divide the image size")
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


@correct("patchify", "python_loops")
def _(images, patch_size):
    """One slice per patch, in reading order, stacked."""
    if images.dim() == 3:
        images = images.unsqueeze(1)
    H, W = images.shape[-2:]
    p = patch_size
    if H % p or W % p:
        raise ValueError("patch_size must divide the image size")
    squares = [
        images[:, :, top : top + p, left : left + p].flatten(start_dim=1)
        for top in range(0, H, p)
        for left in range(0, W, p)
    ]
    return torch.stack(squares, dim=1)


@correct("patchify", "movedim_views")
def _(images, patch_size):
    """The rows of patches first, then the columns, moved into place with movedim."""
    if images.dim() == 3:
        images = images.unsqueeze(1)
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError("patch_size must divide the image size")
    x = images.reshape(B, C, H // p, p, W // p, p)
    x = torch.movedim(x, (2, 4), (1, 2))  # (B, rows, cols, C, p, p)
    return x.flatten(3).flatten(1, 2)


@correct("unpatchify", "functional_fold")
def _(patches, patch_size, height, width):
    """F.fold (col2im), the inverse of F.unfold for patches that do not overlap."""
    n, size = patches.shape[1], patches.shape[2]
    if (height // patch_size) * (width // patch_size) != n or size % patch_size**2:
        raise ValueError("these patches do not tile the image")
    return F.fold(
        patches.transpose(1, 2), (height, width), kernel_size=patch_size, stride=patch_size
    )


@correct("unpatchify", "python_loops")
def _(patches, patch_size, height, width):
    """Each patch written into its square of a new image."""
    B, N, D = patches.shape
    p = patch_size
    cols = width // p
    if N != (height // p) * cols or D % (p * p) != 0:
        raise ValueError("these patches do not tile the image")
    C = D // (p * p)
    images = patches.new_zeros(B, C, height, width)
    for n in range(N):
        top, left = (n // cols) * p, (n % cols) * p
        images[:, :, top : top + p, left : left + p] = patches[:, n].reshape(B, C, p, p)
    return images


@correct("unpatchify", "concatenated_rows")
def _(patches, patch_size, height, width):
    """Each row of patches side by side (torch.cat along the width), the rows stacked."""
    B, N, D = patches.shape
    p = patch_size
    rows, cols = height // p, width // p
    if N != rows * cols or D % (p * p):
        raise ValueError("these patches do not tile the image")
    squares = patches.reshape(B, N, -1, p, p)
    strips = [
        torch.cat(list(squares[:, r * cols : (r + 1) * cols].unbind(1)), dim=-1)
        for r in range(rows)
    ]
    return torch.cat(strips, dim=-2)


@correct("PatchEmbedding", "convolution")
class _(nn.Module):
    """The projection applied as a convolution with stride p (its weights viewed as kernels),
    the class token repeated, each part of the positions added to its own tokens."""

    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__()
        self.patch_size = patch_size
        self.projection = nn.Linear(channels * patch_size * patch_size, d_model)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))
        grid = image_size // patch_size
        self.positions = nn.Parameter(torch.randn(1, grid * grid + 1, d_model) / 50)

    def forward(self, images):
        if images.dim() == 3:
            images = images.unsqueeze(1)
        p, (d, k) = self.patch_size, self.projection.weight.shape
        kernels = self.projection.weight.view(d, k // (p * p), p, p)
        maps = F.conv2d(images, kernels, self.projection.bias, stride=p)  # (B, d, rows, cols)
        tokens = maps.flatten(2).transpose(1, 2) + self.positions[:, 1:]
        first = self.class_token.repeat(images.shape[0], 1, 1) + self.positions[:, :1]
        return torch.cat((first, tokens), dim=1)


@correct("PatchEmbedding", "unfold_einsum")
class _(nn.Module):
    """Patches by F.unfold, the projection by einsum on its weight and bias."""

    def __init__(self, image_size, patch_size, d_model, channels=1):
        super().__init__()
        self.patch_size = patch_size
        n = (image_size // patch_size) ** 2
        self.projection = nn.Linear(channels * patch_size**2, d_model)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.positions = nn.Parameter(torch.empty(1, 1 + n, d_model))
        nn.init.normal_(self.positions, std=0.02)

    def forward(self, images):
        if images.dim() == 3:
            images = images[:, None]
        patches = F.unfold(images, self.patch_size, stride=self.patch_size).transpose(1, 2)
        w, b = self.projection.weight, self.projection.bias
        tokens = torch.einsum("bnk,dk->bnd", patches, w) + b
        batch = tokens.shape[0]
        return torch.cat([self.class_token.expand(batch, 1, -1), tokens], 1) + self.positions


@correct("ClassificationHead", "torch_layer_norm")
class _(nn.Module):
    """torch.nn.LayerNorm (the same weight and bias, eps 1e-5) instead of the course's."""

    def __init__(self, d_model, n_classes):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.linear = nn.Linear(d_model, n_classes)

    def forward(self, tokens):
        return self.linear(self.norm(tokens[:, 0, :]))


@correct("ClassificationHead", "norm_every_token")
class _(_Head):
    """Every token normalised, then the class token read: a LayerNorm works token by token."""

    def forward(self, tokens):
        return self.linear(self.norm(tokens)).select(1, 0)


@correct("ClassificationHead", "by_hand")
class _(_Head):
    """The LayerNorm's formula and the linear layer written out, on the layers' weights."""

    def forward(self, tokens):
        x = tokens[:, 0]
        variance, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
        normed = self.norm.weight * (x - mean) * torch.rsqrt(variance + 1e-5) + self.norm.bias
        return F.linear(normed, self.linear.weight, self.linear.bias)
