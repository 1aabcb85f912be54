import pytest
import yaml

from conftest import make_chapter
from reprobook.book.catalog import papers, parts
from reprobook.book.chapters import ChapterError, discover, find, select
from reprobook.book.toc import render_toc


def test_catalog_has_76_papers_in_8_parts():
    ps = papers()
    assert len(ps) == 76 and len(parts()) == 8
    assert {p.part for p in ps} == {p.id for p in parts()}
    assert len({p.slug for p in ps}) == 76


def test_discover_and_select(tiny_book):
    make_chapter(tiny_book, "clipped-sgd")
    make_chapter(tiny_book, "h-pmd")
    chs = discover()
    assert [c.slug for c in chs] == ["clipped-sgd", "h-pmd"]  # optimization part before rl
    assert find("rl/h-pmd").slug == "h-pmd"
    assert [c.slug for c in select(part="rl")] == ["h-pmd"]
    assert [c.slug for c in select(["h-pmd", "h-pmd"])] == ["h-pmd"]
    with pytest.raises(ChapterError, match="unknown chapter\\(s\\) 'nope'"):
        select(["nope"])
    with pytest.raises(ChapterError, match="unknown part 'physics'"):
        select(part="physics")
    with pytest.raises(ChapterError, match="name chapters"):
        select([])


@pytest.mark.parametrize("sidecar,match", [
    ({"profiles": {"tpu": {}}}, "unknown profile 'tpu'"),
    ({"profiles": {"cpu": {"n_trials": 3}}}, "unknown parameter 'n_trials'"),
    ({"profiles": {"cpu": {"n": "many"}}}, "parameter 'n' must be int"),
    ({"expected": {"positive": "sort of"}}, "expected verdict 'sort of'"),
    ({"colour": "red"}, "unknown keys"),
    ({"paper": 3}, "catalog says 25"),
    ({"timeout": -1}, "timeout"),
])
def test_bad_sidecars_are_named(tiny_book, sidecar, match):
    make_chapter(tiny_book, "clipped-sgd", sidecar=sidecar)
    with pytest.raises(ChapterError, match=match):
        discover()


def test_missing_sidecar_and_wrong_part(tiny_book):
    p = make_chapter(tiny_book, "clipped-sgd")
    p.with_suffix(".yml").unlink()
    with pytest.raises(ChapterError, match="missing sidecar"):
        discover()
    p.unlink()
    q = make_chapter(tiny_book, "h-pmd")
    moved = tiny_book / "notebooks" / "vision" / "h-pmd.ipynb"
    moved.parent.mkdir()
    q.rename(moved)
    q.with_suffix(".yml").rename(moved.with_suffix(".yml"))
    with pytest.raises(ChapterError, match="part 'rl'"):
        discover()


def test_toc_lists_all_parts_and_existing_chapters(tiny_book):
    make_chapter(tiny_book, "h-pmd")
    toc = yaml.safe_load(render_toc())
    captions = [p["caption"] for p in toc["parts"]]
    assert captions[1:] == [p.title for p in parts()]
    rl = toc["parts"][1 + [p.id for p in parts()].index("rl")]
    # the part's title appears once (the caption); its page is "About this part"
    assert rl["chapters"] == [{"file": "book/parts/rl", "title": "About this part"},
                              {"file": "notebooks/rl/h-pmd"}]


def test_toc_gives_a_plain_nav_title_when_the_heading_has_tex(tiny_book):
    import nbformat
    path = make_chapter(tiny_book, "h-pmd")
    make_chapter(tiny_book, "clipped-sgd")
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "# Mirror descent with lookahead ($h$-PMD): \"quoted\"\n\nText with $x$."
    nbformat.write(nb, path)
    toc = yaml.safe_load(render_toc())
    sections = [c for p in toc["parts"] for c in p["chapters"]]
    assert {"file": "notebooks/rl/h-pmd",
            "title": 'Mirror descent with lookahead (h-PMD): "quoted"'} in sections
    assert {"file": "notebooks/optimization/clipped-sgd"} in sections  # no TeX: no override


def test_list_summarises_a_sidecar_that_allows_several_verdicts():
    from reprobook.book.cli import _verdict_summary

    got = _verdict_summary({"a": "reproduced", "b": ["reproduced", "inconclusive at this scale"],
                            "c": "reproduced"})
    assert got == "2 reproduced, 1 reproduced or inconclusive at this scale"
