"""`agentrl view` in a real browser: headless Chromium runs the page's script and the test
reads the resulting DOM (``--dump-dom``); the URL hash drives the filters.

The browser and how to leave these tests out: `tests.fakes.browser`.
"""

from __future__ import annotations

import math
import re
import statistics
import subprocess
from urllib.parse import quote

import pytest
from agentrl.cli import main as cli_main
from agentrl.observability.token_view import SCALES

from tests.fakes.browser import count, dom, headless_command, needs_browser
from tests.fakes.view_runs import write_run

pytestmark = needs_browser


def rows(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr class="episode-row[^"]*" data-episode="(\d+)"', html)]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("view")
    a = write_run(root / "run-a", steps=6, dump_every=2, groups=3, g=4, eval_tasks=12, seed=1)
    b = write_run(root / "run-b", steps=6, dump_every=3, groups=2, g=4, eval_tasks=12, seed=2)
    assert cli_main(["view", str(root / "run-a")]) == 0
    assert (
        cli_main(["view", str(root / "run-a"), str(root / "run-b"), "-o", str(root / "both.html")])
        == 0
    )
    return {
        "root": root,
        "a": a,
        "b": b,
        "one": root / "run-a" / "view.html",
        "both": root / "both.html",
    }


def test_the_list_shows_every_dumped_episode(pages, tmp_path):
    episodes = pages["a"]["train"] + pages["a"]["eval"]
    html = dom(pages["one"], "tab=episodes", tmp_path)
    assert count(html) == len(episodes) == 48
    assert rows(html) == list(range(48))  # one page, in file order: train steps, then eval


def test_a_reward_filter_changes_the_count(pages, tmp_path):
    episodes = pages["a"]["train"] + pages["a"]["eval"]
    rewards = [e["reward"] for e in episodes]
    threshold = statistics.median(rewards)
    expected = sum(r >= threshold for r in rewards)
    assert 0 < expected < len(episodes)
    html = dom(pages["one"], f"tab=episodes&min_reward={threshold!r}", tmp_path)
    assert count(html) == expected
    shown = rows(html)
    assert all(episodes[i]["reward"] >= threshold for i in shown) and len(shown) == expected


def test_step_result_tool_error_and_text_filters(pages, tmp_path):
    episodes = pages["a"]["train"] + pages["a"]["eval"]
    passed = sum(1 for e in pages["a"]["eval"] if e["passed"])
    html = dom(pages["one"], "tab=episodes&step=eval:6&result=pass", tmp_path)
    assert count(html) == passed
    errors = sum(1 for e in episodes if any(not c["ok"] for c in e["tool_calls"]))
    assert 0 < errors < len(episodes)
    assert count(dom(pages["one"], "tab=episodes&errors=with", tmp_path)) == errors
    task = episodes[5]["messages"][1]["content"]
    same = sum(1 for e in episodes if task in e["messages"][1]["content"])
    html = dom(pages["one"], "tab=episodes&q=" + quote(task, safe=""), tmp_path)
    assert count(html) == same >= 1


def test_an_episode_shows_its_reward_terms_and_tool_calls(pages, tmp_path):
    episodes = pages["a"]["train"] + pages["a"]["eval"]
    index = next(i for i, e in enumerate(episodes) if any(not c["ok"] for c in e["tool_calls"]))
    record = episodes[index]
    html = dom(pages["one"], f"tab=episodes&episode={index}", tmp_path)
    shown = re.findall(r'<div class="term[^"]*" data-term="([^"]+)"', html)
    assert sorted(shown) == sorted(record["reward_terms"]) and len(shown) > 10
    assert '<div class="call failed">' in html and "invalid expression" in html
    assert html.count('<mark class="toolcall">') >= 2  # the calls inside assistant turns
    shot = tmp_path / "episode.png"
    url = pages["one"].resolve().as_uri() + f"#tab=episodes&episode={index}"
    command = [*headless_command(tmp_path), "--window-size=1500,1000", f"--screenshot={shot}", url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000


def test_group_view_curves_and_two_runs_side_by_side(pages, tmp_path):
    html = dom(pages["one"], "tab=group&group=train:4:1", tmp_path)
    assert html.count('class="group-col"') == 4
    html = dom(pages["one"], "tab=summary", tmp_path)
    assert html.count('class="chart"') == 5 and html.count("<polyline") >= 6
    html = dom(pages["both"], "tab=compare", tmp_path)
    assert (
        html.count('<tr class="episode-row compare-row"') == 12
    )  # the same 12 eval tasks in both runs
    assert "12 tasks in both" in html


def test_a_large_list_renders_one_page_at_a_time(tmp_path):
    big = write_run(tmp_path / "big", steps=3, dump_every=1, groups=10, g=8, eval_tasks=0)
    assert cli_main(["view", str(tmp_path / "big")]) == 0
    page = tmp_path / "big" / "view.html"
    html = dom(page, "tab=episodes&page=2", tmp_path)
    assert count(html) == len(big["train"]) == 240
    assert rows(html) == list(range(200, 240))  # the third page of 100; no other row built
    assert "page 3 / 3" in html


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")] if text else []


def test_the_token_view_holds_every_token_with_its_values(pages, tmp_path):
    episodes = pages["a"]["train"] + pages["a"]["eval"]
    index = next(i for i, e in enumerate(episodes) if e.get("token_view", {}).get("prompt_ref"))
    record = episodes[index]
    view = record["token_view"]
    n = view["prompt"] + len(_ints(view["ids"]))  # the prompt comes from its group's first
    behaviour = [v / SCALES["lp"] for v in _ints(view["lp"])]
    html = dom(pages["one"], f"tab=episodes&episode={index}&tok=lp", tmp_path)
    spans = re.findall(r'<span class="tok([^"]*)" data-t="(\d+)"[^>]*>', html)
    assert len(spans) == n and [int(t) for _, t in spans] == list(range(n))
    masked = [int(t) for cls, t in spans if "masked" in cls]
    prompt = [int(t) for cls, t in spans if "prompt" in cls]
    assert prompt == list(range(view["prompt"]))
    observation = [t for t in masked if t >= view["prompt"]]
    assert len(observation) == 6  # the episode's tool-result tokens, shown but masked
    trained = r'<span class="tok" data-t="\d+" data-id="\d+" title="[^"]*" data-v="([^"]*)"'
    values = [float(v) for v in re.findall(trained, html)]
    assert values == pytest.approx(behaviour, abs=1e-4) and len(values) == n - len(masked)
    assert "w12 " in html  # decoded through the dump's vocabulary table
    html = dom(pages["one"], f"tab=episodes&episode={index}&tok=ratio", tmp_path)
    ratios = [float(v) for v in re.findall(r'data-v="([^"]*)"', html)]
    gap = record["logp_gap_max"]
    assert ratios == pytest.approx([math.exp(-gap)] * len(values), abs=1e-3)


def test_the_log_prob_gap_filter_finds_the_mismatched_episodes(pages, tmp_path):
    episodes = pages["a"]["train"] + pages["a"]["eval"]
    far = [i for i, e in enumerate(episodes) if (e.get("logp_gap_max") or 0) >= 0.1]
    assert 0 < len(far) < len(pages["a"]["train"])
    html = dom(pages["one"], "tab=episodes&gap_min=0.1", tmp_path)
    assert count(html) == len(far) and rows(html) == far
