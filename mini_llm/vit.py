"""Chapter 13 -- A Vision Transformer.

Chapter 9's encoder, unchanged, reading an image instead of a sentence (Dosovitskiy et al.,
2021, "An Image is Worth 16x16 Words"). The image is cut into square patches; each patch,
flattened, is one token. A linear layer embeds the tokens, a learned **class token** is put in
front of them, learned positions are added, and the encoder's self-attention lets every patch
look at every other. The class token's output, after a last LayerNorm, is read by a linear
head that scores the classes.

Nothing tells the model that neighbouring patches are neighbours: the positions are learned
from data, which is why a ViT needs more data than a network built for images, and why, on
this chapter's few digits, a plain MLP of equal size is ahead of it until the data grows.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from mini_llm.corpus import load_digits
from mini_llm.transformer import EncoderLayer, LayerNorm


def digit_split(test_fraction: float = 0.25, seed: int = 0):
    """scikit-learn's digits as float images in [0, 1], split once into train and test.

    Returns ``(train_images, train_labels, test_images, test_labels)``; images (N, 8, 8).
    The split is a fixed shuffle, so every model of the chapter is tested on the same images.
    """
    images, labels = load_digits()
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = round(test_fraction * len(labels))
    test, train = order[:n_test], order[n_test:]
    x = torch.from_numpy(images).float() / 16.0  # ink counts 0..16 -> 0..1
    y = torch.from_numpy(labels)
    return x[train], y[train], x[test], y[test]


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into square patches, one flattened patch per token.

    ``images`` (B, H, W) or (B, C, H, W) -> (B, N, C·p·p) with N = (H/p)·(W/p), the patches in
    reading order (left to right, then top to bottom), each patch flattened channel by channel,
    row by row.
    """
    if images.dim() == 3:
        images = images.unsqueeze(1)
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"patch_size={p} must divide the image size {H}x{W}")
    grid = images.reshape(B, C, H // p, p, W // p, p)  # (B, C, rows, p, cols, p)
    return grid.permute(0, 2, 4, 1, 3, 5).reshape(B, (H // p) * (W // p), C * p * p)


def unpatchify(patches: torch.Tensor, patch_size: int, height: int, width: int) -> torch.Tensor:
    """The inverse of :func:`patchify`: (B, N, C·p·p) -> images (B, C, H, W)."""
    B, N, D = patches.shape
    p = patch_size
    rows, cols = height // p, width // p
    if height % p or width % p or rows * cols != N or D % (p * p):
        raise ValueError(f"{N} patches of {D} values do not tile a {height}x{width} image")
    C = D // (p * p)
    grid = patches.reshape(B, rows, cols, C, p, p).permute(0, 3, 1, 4, 2, 5)
    return grid.reshape(B, C, height, width)


class PatchEmbedding(nn.Module):
    """Patches -> tokens: a linear projection, a class token in front, learned positions added.

    ``forward(images)`` (B, H, W) or (B, C, H, W) -> (B, 1 + N, d_model); token 0 is the class
    token, the same learned vector for every image until attention writes into it.
    """

    def __init__(self, image_size: int, patch_size: int, d_model: int, channels: int = 1):
        super().__init__()
        self.patch_size = patch_size
        n_patches = (image_size // patch_size) ** 2
        self.projection = nn.Linear(channels * patch_size**2, d_model)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.positions = nn.Parameter(0.02 * torch.randn(1, 1 + n_patches, d_model))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        tokens = self.projection(patchify(images, self.patch_size))
        class_token = self.class_token.expand(tokens.shape[0], -1, -1)
        return torch.cat([class_token, tokens], dim=1) + self.positions


class ClassificationHead(nn.Module):
    """Encoder tokens (B, 1 + N, d) -> class scores (B, n_classes), read from the class token.

    Only token 0 is classified: attention has had every layer to gather into it what the
    patches say. A LayerNorm first, since the pre-LN encoder leaves its output unnormalised.
    """

    def __init__(self, d_model: int, n_classes: int):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.linear = nn.Linear(d_model, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(tokens[:, 0]))


class VisionTransformer(nn.Module):
    """Patch embedding, pre-LN encoder layers (chapter 9's) and a classification head.

    ``forward(images)`` returns class scores (B, n_classes) read from the class token;
    ``attention(images)`` returns each layer's attention weights (B, heads, 1 + N, 1 + N).
    """

    def __init__(
        self,
        image_size: int = 8,
        patch_size: int = 2,
        d_model: int = 32,
        n_heads: int = 4,
        n_layers: int = 2,
        n_classes: int = 10,
        channels: int = 1,
    ):
        super().__init__()
        self.embedding = PatchEmbedding(image_size, patch_size, d_model, channels)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, norm_first=True) for _ in range(n_layers)
        )
        self.head = ClassificationHead(d_model, n_classes)

    def encode(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The encoder's output tokens (B, 1 + N, d) and every layer's attention weights."""
        x = self.embedding(images)
        maps = []
        for layer in self.layers:
            x, weights = layer(x)
            maps.append(weights)
        return x, maps

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        tokens, _ = self.encode(images)
        return self.head(tokens)

    def attention(self, images: torch.Tensor) -> list[torch.Tensor]:
        return self.encode(images)[1]


class PixelMLP(nn.Module):
    """The baseline: every pixel into one vector, two hidden layers of ``hidden`` ReLU units."""

    def __init__(self, n_pixels: int = 64, hidden: int = 128, n_classes: int = 10):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(n_pixels, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.layers(images)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matched_mlp(target: int, n_pixels: int = 64, n_classes: int = 10) -> PixelMLP:
    """The :class:`PixelMLP` whose parameter count is nearest ``target`` (a fair comparison)."""
    best = min(
        range(1, 4096),
        key=lambda h: abs((n_pixels + 1) * h + (h + 1) * h + (h + 1) * n_classes - target),
    )
    return PixelMLP(n_pixels, best, n_classes)


def train_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 1500,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    seed: int = 0,
    progress: bool = False,
) -> list[float]:
    """Minibatch AdamW on cross-entropy with a cosine-decayed rate; the loss of every step.

    The batches are drawn by a private generator seeded with ``seed``, so two models trained
    with the same seed see the same images in the same order.
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    losses = []
    model.train()
    for _ in tqdm(range(steps), disable=not progress, desc="training"):
        batch = torch.randint(len(labels), (batch_size,), generator=generator)
        loss = F.cross_entropy(model(images[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of images whose highest-scoring class is their label."""
    model.eval()
    return (model(images).argmax(dim=-1) == labels).float().mean().item()
