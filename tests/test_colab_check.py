"""What the Colab-like check (tests/colab_check.py, `make colab-check`) looks for, on texts of known content."""

from __future__ import annotations

import pytest

from tests import colab_check

PIP_CONFLICT = """\
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. \
This behaviour is the source of the following dependency conflicts.
sentence-transformers 5.1.2 requires transformers<5.0.0,>=4.41.0, but you have transformers 5.24.0 which is \
incompatible.
"""


def test_pip_conflict_lines_are_found_and_a_clean_install_has_none():
    assert len(colab_check.CONFLICT.findall(PIP_CONFLICT)) == 2
    clean = "Installing the book's helpers (about a minute)... done\nSuccessfully installed transformers-5.24.0\n"
    assert colab_check.CONFLICT.findall(clean) == []


def test_myst_roles_directives_and_targets_are_found():
    markdown = "\n".join(
        [
            "(sec-ranks)=",
            "# Ranks",
            "The rank is {glue:text}`rank` of {doc}`02_rank_argument`, as {cite}`brunner2020` say.",
            "```{exercise}",
            ":label: ex-1",
            "```",
            ":::{note}",
            ":::",
        ]
    )
    found = colab_check.MYST.findall(markdown)
    assert len(found) == 6, found  # the target, three roles, two directive openings


def test_plain_markdown_is_not_markup():
    markdown = (
        "# Ranks\nThe rank is **12** of [chapter 2](https://example.org/02.html) (Brunner et al., 2020).\n"
        "$\\mathrm{rank}(T) \\le d_v$, a set $\\{1, \\dots, n\\}$, `code` and\n```python\nx = {'a': 1}\n```\n"
        "<details><summary>Solution</summary>\n\ntext\n</details>\n"
    )
    assert colab_check.MYST.findall(markdown) == []


def test_the_install_url_points_at_a_fresh_clone_at_the_same_commit(tmp_path):
    pin = "0123456789abcdef0123456789abcdef01234567"
    line = (
        f'subprocess.run([*pip, "identifiability-book[decoder] @ git+https://github.com/org/repo@{pin}"], check=True)'
    )
    clone = tmp_path / "clone"
    replaced, n = colab_check.GIT_URL.subn("git+" + clone.as_uri(), line)
    assert n == 1
    assert f'"identifiability-book[decoder] @ git+{clone.as_uri()}@{pin}"' in replaced


def test_the_fresh_clone_holds_main_and_its_history(tmp_path):
    import subprocess

    if subprocess.run(
        ["git", "-C", str(colab_check.REPO), "rev-parse", "--verify", "main"], capture_output=True
    ).returncode:
        pytest.skip("no main branch in this checkout")
    clone = colab_check.fresh_clone(tmp_path)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    main = subprocess.run(
        ["git", "-C", str(colab_check.REPO), "rev-parse", "main"], capture_output=True, text=True
    ).stdout
    assert head == main
