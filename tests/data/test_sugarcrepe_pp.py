import json

import numpy as np
import pytest

from reprobook.data.caption_triplets import tot_correct
from reprobook.data.sugarcrepe_pp import SUBSET_FILES, load_sugarcrepe_pp

# hand-written items in the released layout (not the benchmark's own captions)
ITEMS = {
    "swap_att.json": [
        {"id": 0, "filename": "000000000001.jpg", "caption": "A red kite above a green field.\n",
         "caption2": "Over a field that is green flies a kite that is red.",
         "negative_caption": "A green kite above a red field."},
        {"id": 1, "filename": "000000000002.jpg", "caption": "A small dog beside a large  box.",
         "caption2": "Next to a big box sits a little dog.",
         "negative_caption": "A large dog beside a small box."},
    ],
    "replace_rel.json": [
        {"id": 7, "filename": "000000000003.jpg", "caption": "A cat sleeping on a sofa.",
         "caption2": "On the sofa, a cat is asleep.", "negative_caption": "A cat jumping off a sofa."},
    ],
}


@pytest.fixture
def folder(tmp_path):
    for name, items in ITEMS.items():
        (tmp_path / name).write_text(json.dumps(items))
    return tmp_path


def test_reads_the_released_layout_and_normalises_whitespace(folder):
    got = load_sugarcrepe_pp(folder, subsets=("swap-att", "replace-rel"))
    assert [t.id for t in got["swap-att"]] == [0, 1] and got["replace-rel"][0].id == 7
    t = got["swap-att"][0]
    assert (t.subset, t.image, t.p1) == ("swap-att", "000000000001.jpg", "A red kite above a green field.")
    assert got["swap-att"][1].p1 == "A small dog beside a large box."
    assert len(load_sugarcrepe_pp(folder, "swap-att", limit=1)["swap-att"]) == 1
    assert set(SUBSET_FILES.values()) >= set(ITEMS)


def test_triplets_feed_the_text_only_rule(folder):
    """Word overlap (Jaccard) as the similarity: a swap keeps every word of P1 in N, so a bag of
    words cannot prefer the paraphrase and fails the text-only rule on every swap item."""
    def jac(a, b):
        a, b = set(a.lower().strip(".").split()), set(b.lower().strip(".").split())
        return len(a & b) / len(a | b)

    got = load_sugarcrepe_pp(folder, subsets=("swap-att", "replace-rel"))
    res = {}
    for s, ts in got.items():
        sims = np.array([[jac(t.p1, t.p2), jac(t.p1, t.n), jac(t.p2, t.n)] for t in ts])
        res[s] = tot_correct(sims[:, 0], sims[:, 1], sims[:, 2])
    assert not res["swap-att"].any()


def test_bad_input_is_named(folder, tmp_path_factory):
    with pytest.raises(FileNotFoundError, match="no SugarCrepe\\+\\+ folder"):
        load_sugarcrepe_pp(folder / "nope")
    with pytest.raises(FileNotFoundError, match="has no swap_obj.json"):
        load_sugarcrepe_pp(folder, "swap-obj")
    with pytest.raises(ValueError, match="unknown SugarCrepe\\+\\+ subset 'swap_att'"):
        load_sugarcrepe_pp(folder, "swap_att")
    bad = tmp_path_factory.mktemp("bad")
    (bad / "swap_att.json").write_text(json.dumps([{"id": 3, "caption": "a", "caption2": " "}]))
    with pytest.raises(ValueError, match=r"item 0 \(id 3\) lacks a non-empty caption2, negative_caption"):
        load_sugarcrepe_pp(bad, "swap-att")
    (bad / "swap_att.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not valid JSON"):
        load_sugarcrepe_pp(bad, "swap-att")
