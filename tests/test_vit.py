"""Chapter 13's Vision Transformer: patches, the class token, and a classifier that learns."""

import pytest
import torch

from mini_llm import vit
from mini_llm.corpus import load_digits


def test_digits_are_the_shipped_set():
    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and labels.shape == (1797,)
    assert images.min() == 0 and images.max() == 16
    assert sorted(set(labels.tolist())) == list(range(10))


def test_split_is_disjoint_and_fixed():
    a = vit.digit_split()
    b = vit.digit_split()
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    train, test = a[0].reshape(len(a[0]), -1), a[2].reshape(len(a[2]), -1)
    assert len(train) + len(test) == 1797 and abs(len(test) - 449) <= 1
    assert 0.0 <= train.min() and train.max() <= 1.0


@pytest.mark.parametrize("shape,p", [((3, 8, 8), 2), ((2, 3, 12, 8), 4), ((1, 1, 6, 6), 3)])
def test_unpatchify_inverts_patchify(shape, p):
    images = torch.randn(shape)
    patches = vit.patchify(images, p)
    channels = 1 if len(shape) == 3 else shape[1]
    H, W = shape[-2:]
    assert patches.shape == (shape[0], (H // p) * (W // p), channels * p * p)
    back = vit.unpatchify(patches, p, H, W)
    assert torch.equal(back.reshape(shape), images)


def test_patches_are_in_reading_order():
    image = torch.arange(16.0).reshape(1, 4, 4)
    patches = vit.patchify(image, 2)
    assert patches[0, 0].tolist() == [0, 1, 4, 5]  # top left
    assert patches[0, 1].tolist() == [2, 3, 6, 7]  # top right, before the second row
    assert patches[0, 2].tolist() == [8, 9, 12, 13]


def test_patch_size_must_divide_the_image():
    with pytest.raises(ValueError, match="divide"):
        vit.patchify(torch.zeros(1, 8, 8), 3)
    with pytest.raises(ValueError, match="tile"):
        vit.unpatchify(torch.zeros(1, 5, 4), 2, 4, 4)


def test_embedding_puts_the_class_token_first():
    torch.manual_seed(0)
    embed = vit.PatchEmbedding(image_size=8, patch_size=2, d_model=16)
    tokens = embed(torch.rand(5, 8, 8))
    assert tokens.shape == (5, 17, 16)
    first = embed.class_token[0, 0] + embed.positions[0, 0]
    assert torch.allclose(tokens[:, 0], first.expand(5, -1))  # the same for every image


def test_vit_shapes_and_attention_over_all_tokens():
    torch.manual_seed(0)
    model = vit.VisionTransformer(n_layers=2, n_heads=4)
    images = torch.rand(3, 8, 8)
    assert model(images).shape == (3, 10)
    maps = model.attention(images)
    assert len(maps) == 2 and maps[0].shape == (3, 4, 17, 17)
    assert torch.allclose(maps[0].sum(-1), torch.ones(3, 4, 17), atol=1e-5)


def test_class_token_reads_the_image():
    """Changing one patch changes the class scores: attention carries it to the class token."""
    torch.manual_seed(0)
    model = vit.VisionTransformer().eval()
    images = torch.rand(1, 8, 8)
    changed = images.clone()
    changed[0, 6:, 6:] += 1.0  # the last patch only
    assert not torch.allclose(model(images), model(changed))


def test_matched_mlp_has_nearly_the_parameters():
    target = vit.parameter_count(vit.VisionTransformer())
    mlp = vit.matched_mlp(target)
    assert abs(vit.parameter_count(mlp) - target) / target < 0.01


def test_training_learns_the_digits():
    torch.manual_seed(0)
    x, y, xt, yt = vit.digit_split()
    model = vit.matched_mlp(5000)
    losses = vit.train_classifier(model, x, y, steps=300, seed=0)
    assert sum(losses[-20:]) / 20 < 0.5 * sum(losses[:20]) / 20
    assert vit.accuracy(model, xt, yt) > 0.85  # ten classes: chance is 0.1
