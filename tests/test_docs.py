"""Generated docs are current: the README lists every experiment with its one command."""

from __future__ import annotations

from conftest import REPO

from gicomm.docs import experiments, render_readme, run_command


def test_readme_experiment_table_is_current():
    text = (REPO / "README.md").read_text()
    assert render_readme(text) == text, "README.md is stale: run `.venv/bin/python -m gicomm.docs`"
    for e in experiments():
        assert run_command(e.name) in text
