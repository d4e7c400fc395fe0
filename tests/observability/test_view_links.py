"""`agentrl view` opened from a link that names what the dumps do not have: a bare step
number is normalised to its dump, anything unknown is dropped and the page says so."""

from __future__ import annotations

import re

import pytest
from agentrl.cli import main as cli_main

from tests.fakes.browser import count, dom, needs_browser
from tests.fakes.view_runs import write_run

pytestmark = needs_browser


@pytest.fixture(scope="module")
def view(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("links")
    run = write_run(root / "run", steps=6, dump_every=2, groups=2, g=2, eval_tasks=4, seed=3)
    assert cli_main(["view", str(root / "run")]) == 0
    return {**run, "page": root / "run" / "view.html"}


def _status(html: str) -> str:
    match = re.search(r'<span id="status"[^>]*>([^<]*)</span>', html)
    assert match, "no status line in the page"
    return match.group(1).replace("&quot;", '"')


@pytest.mark.slow
def test_a_bare_step_number_opens_that_steps_dump(view, tmp_path) -> None:
    dumped = [e for e in view["train"] if e["step"] == 2]
    assert dumped
    html = dom(view["page"], "tab=episodes&step=2", tmp_path)
    assert count(html) == len(dumped)
    assert "matches nothing" not in _status(html)


@pytest.mark.slow
def test_an_unknown_step_is_reported_not_shown_as_all_steps_and_empty(view, tmp_path) -> None:
    episodes = view["train"] + view["eval"]
    html = dom(view["page"], "tab=episodes&step=train:5&sort=bogus", tmp_path)
    status = _status(html)
    assert 'the link\'s step "train:5" (steps dumped: ' in status and "step 2" in status
    assert 'sort "bogus"' in status
    assert count(html) == len(episodes)  # the filter it could not apply is dropped
