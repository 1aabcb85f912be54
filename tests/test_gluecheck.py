import json

import nbformat

from reprobook.book.gluecheck import missing_glue, referenced_keys


def nb_with(markdown: str, glued: list[str]) -> str:
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("x")
    code.outputs = [nbformat.v4.new_output(
        "display_data", data={"application/papermill.record/text/plain": "1"},
        metadata={"scrapbook": {"name": k, "mime_prefix": "application/papermill.record/"}})
        for k in glued]
    nb.cells = [nbformat.v4.new_markdown_cell(markdown), code]
    return json.dumps(nb)


def test_missing_keys_are_named_and_format_specs_ignored():
    md = ("ratio {glue:text}`narrower.value:.2f` [{glue:text}`narrower.low:.2f`], "
          "verdict {glue:text}`narrower.verdict`, n {glue}`narrower.n`\n\n```{glue:figure} fig\n```")
    assert referenced_keys(json.loads(nb_with(md, []))) == [
        "narrower.value", "narrower.low", "narrower.verdict", "narrower.n", "fig"]
    assert missing_glue(nb_with(md, ["narrower.value", "narrower.low", "narrower.n"])) == [
        "fig", "narrower.verdict"]
    assert missing_glue(nb_with("no numbers here: 0.93 is typed", [])) == []
