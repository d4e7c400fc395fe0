"""`agentrl view` without a browser: inputs, output paths, the embedded data, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentrl.cli import main as cli_main
from agentrl.observability.rollout_dump import write_records
from agentrl.observability.viewer import default_output, load_source, render_page


def _data(html: str) -> dict:
    match = re.search(
        r'<script type="application/json" id="agentrl-data">(.*?)</script>', html, re.S
    )
    assert match, "no embedded data"
    return json.loads(match.group(1))


def test_model_text_cannot_end_the_data_block(tmp_path: Path) -> None:
    nasty = "</script><script>alert(1)</script><!-- \u2028"
    dump = write_records(
        tmp_path / "e.jsonl",
        [
            {
                "kind": "eval",
                "step": 0,
                "reward": 1.0,
                "messages": [{"role": "assistant", "content": nasty}],
            }
        ],
    )
    html = render_page([load_source(dump)])
    assert html.count("</script>") == 2  # the data block's and the script's own
    assert _data(html)["runs"][0]["episodes"][0]["messages"][0]["content"] == nasty
    assert "<style>" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_outputs_go_next_to_the_input(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    assert default_output([tmp_path / "run"]) == tmp_path / "run" / "view.html"
    assert default_output([tmp_path / "a.jsonl.gz"]) == tmp_path / "a.jsonl.gz.html"


def test_two_dumps_are_embedded_in_order_and_bad_inputs_fail(tmp_path: Path, capsys) -> None:
    a = write_records(tmp_path / "a.jsonl.gz", [{"kind": "eval", "step": 0, "passed": True}])
    b = write_records(tmp_path / "b.jsonl.gz", [{"kind": "eval", "step": 0, "passed": False}])
    out = tmp_path / "cmp.html"
    assert cli_main(["view", str(a), str(b), "-o", str(out)]) == 0
    runs = _data(out.read_text())["runs"]
    assert [r["name"] for r in runs] == ["a.jsonl.gz", "b.jsonl.gz"]
    assert [r["episodes"][0]["passed"] for r in runs] == [True, False]
    assert "wrote " in capsys.readouterr().out
    assert cli_main(["view", str(tmp_path / "missing")]) == 2
    assert "no such run directory or dump file" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli_main(["view", str(tmp_path / "empty")]) == 2
    assert "--dump_rollouts" in capsys.readouterr().err
    assert cli_main(["view", str(a), str(b), str(a)]) == 2


def test_names_that_spell_the_page_s_markers_do_not_break_it(tmp_path):
    import json
    import re

    from agentrl.observability.viewer import ViewSource, render_page

    odd = "run__DATA__/*SCRIPT*/__TITLE__"
    source = ViewSource(odd, tmp_path, "run", "", [{"step": 1, "kind": "train"}], [])
    page = render_page([source])
    found = re.search(r'<script type="application/json" id="agentrl-data">(.*?)</script>', page)
    assert found is not None
    data = json.loads(found.group(1))
    assert data["title"] == odd and data["runs"][0]["name"] == odd
    assert page.count('id="agentrl-data"') == 1
