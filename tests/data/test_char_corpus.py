"""CharCorpus: vocabulary, block splits, seeded batches, evaluation windows; the pydoc text."""
import pytest
import torch

from reprobook.data.char_corpus import CharCorpus, CorpusSplit, pydoc_topics_text

TEXT = ("the quick brown fox jumps over the lazy dog. " * 40) + "zz\u00e9"


def test_vocab_encode_decode_round_trip():
    c = CharCorpus.from_text(TEXT)
    assert list(c.vocab) == sorted(set(TEXT))
    assert c.vocab_size == len(set(TEXT)) and not c.unk
    assert c.decode(c.encode("lazy fox")) == "lazy fox"
    assert c.decode(c.ids) == TEXT
    with pytest.raises(ValueError, match="not in the vocabulary"):
        c.encode("Q")


def test_rare_characters_map_to_unk():
    c = CharCorpus.from_text(TEXT, min_count=2)
    assert c.unk and "\u00e9" not in c.vocab and c.vocab_size == len(c.vocab) + 1
    assert int(c.encode("\u00e9Q")[0]) == len(c.vocab) == int(c.encode("Q")[0])
    assert c.decode(c.encode("\u00e9")) == "\ufffd"


def test_split_assigns_disjoint_whole_blocks():
    c = CharCorpus.from_text(TEXT)
    sp = c.split({"train": 0.6, "val": 0.2, "test": 0.2}, block_chars=100, seed=3)
    n_blocks = len(c) // 100
    assert sum(s.blocks.shape[0] for s in sp.values()) == n_blocks
    all_blocks = c.ids[: n_blocks * 100].reshape(n_blocks, 100)
    used = []
    for s in sp.values():
        assert s.blocks.shape[1] == 100
        for row in s.blocks:           # every row is one of the corpus blocks, exactly
            match = (all_blocks == row).all(1).nonzero().flatten().tolist()
            assert match
            used.append(match)
    assert sp["train"].blocks.shape[0] == round(0.6 * n_blocks)
    again = c.split({"train": 0.6, "val": 0.2, "test": 0.2}, block_chars=100, seed=3)
    other = c.split({"train": 0.6, "val": 0.2, "test": 0.2}, block_chars=100, seed=4)
    assert torch.equal(again["val"].blocks, sp["val"].blocks)
    assert not torch.equal(other["train"].blocks, sp["train"].blocks)


@pytest.mark.parametrize("bad", [{"a": 0.5, "b": 0.6}, {"a": 1.0, "b": 0.0}, {}])
def test_split_rejects_bad_shares(bad):
    with pytest.raises(ValueError):
        CharCorpus.from_text(TEXT).split(bad, block_chars=100)


def test_split_needs_a_block_per_split():
    with pytest.raises(ValueError, match="at least one per split"):
        CharCorpus.from_text(TEXT).split({"a": 0.5, "b": 0.5}, block_chars=len(TEXT))


def test_sample_windows_stay_inside_one_block_and_follow_the_seed():
    c = CharCorpus.from_text(TEXT)
    split = CorpusSplit("s", torch.arange(5 * 50).reshape(5, 50))     # ids = positions
    x, y = split.sample(64, 16, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (64, 16)
    assert torch.equal(y[:, :-1], x[:, 1:])                            # targets shifted by one
    assert ((x[:, -1] + 1) == y[:, -1]).all()                            # contiguous
    assert (x[:, 0] // 50 == y[:, -1] // 50).all()                     # never crosses a block edge
    x2, _ = split.sample(64, 16, torch.Generator().manual_seed(0))
    x3, _ = split.sample(64, 16, torch.Generator().manual_seed(1))
    assert torch.equal(x, x2) and not torch.equal(x, x3)
    with pytest.raises(ValueError, match="longer than the blocks"):
        split.sample(2, 50, torch.Generator())
    with pytest.raises(TypeError):
        split.sample(2, 4, 0)
    assert c is not None


def test_windows_tile_the_blocks_without_overlap():
    split = CorpusSplit("s", torch.arange(3 * 41).reshape(3, 41))
    x, y = split.windows(10)
    assert x.shape == (3 * 4, 10)                                         # (41 - 1) // 10 per block
    assert torch.equal(x[:4].flatten(), torch.arange(40))
    assert torch.equal(y[:4].flatten(), torch.arange(1, 41))
    assert torch.equal(x[4, :3], torch.tensor([41, 42, 43]))
    assert split.windows(10, max_windows=5)[0].shape == (5, 10)


def test_pydoc_topics_text_is_python_documentation():
    text, version = pydoc_topics_text()
    assert len(text) > 100_000 and "assignment" in text
    assert version.count(".") == 2
