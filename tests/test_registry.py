"""The claims registry: defined before measured, refused when absent or departed from, one entry per record."""

import json
import re
from pathlib import Path

import pytest

from helpers.book.claims import Claims, Control
from helpers.book.records import committed_record
from helpers.book.registry import UnregisteredClaim, load_registry, parse_registry
from helpers.methods.intervals import Estimate

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
CLAIMS_MIME = "application/vnd.book.claims+json"


def entry(**changes):
    spec = {
        "kind": "paper", "source": "Someone 2020", "statistic": "the share of x", "quantity": "share of x",
        "control": "chance",
        "comparison": "fixed", "side": "above", "status": "confirmatory", "registered": "2026-12-04",
    }  # fmt: skip
    spec.update(changes)
    return spec


def registry(**claims):
    return parse_registry({"rules": {"size_share": 0.1, "size_floor": 0.01}, "chapters": {"99_test": claims}})


def test_a_chapter_refuses_what_the_registry_does_not_define():
    claims = Claims("99_test", registry=registry(known=entry(), paired=entry(comparison="paired")))
    figure = Estimate(0.8, 0.7, 0.9, 20)
    assert claims.paper("known", "a registered claim", figure, Control("chance", 0.5)) == "reproduced"
    assert claims.claims[-1].status == "confirmatory"
    with pytest.raises(UnregisteredClaim, match="not in the registry"):
        claims.paper("unknown", "an unregistered claim", figure, Control("chance", 0.5))
    with pytest.raises(UnregisteredClaim, match="side: registered 'above', given 'below'"):
        claims.paper("known", "the same, other side", figure, Control("chance", 0.5), side="below")
    with pytest.raises(UnregisteredClaim, match="comparison: registered 'paired', given 'fixed'"):
        claims.paper("paired", "a paired claim read against a number", figure, Control("chance", 0.5))
    with pytest.raises(UnregisteredClaim, match="threshold"):
        claims.paper("known", "with a threshold", figure, Control("chance", 0.5), threshold=0.6)
    with pytest.raises(UnregisteredClaim, match="registered as a paper"):
        claims.finding("known", "as a finding", figure, Control("chance", 0.5))


def test_the_size_tolerance_follows_the_rule_or_the_papers_spread():
    book = registry(share=entry(size=True), spread=entry(size=True, spread=0.2))
    assert book.tolerance(book.entry("99_test", "share"), 0.5) == pytest.approx(0.05)
    assert book.tolerance(book.entry("99_test", "share"), 0.02) == pytest.approx(0.01)  # the floor
    assert book.tolerance(book.entry("99_test", "spread"), 0.5) == pytest.approx(0.2)
    claims = Claims("99_test", registry=book)
    assert claims.paper("share", "x", Estimate(0.8, 0.7, 0.9, 20), Control("c", 0.5), size=1.1) == "in direction only"
    assert claims.paper("spread", "x", Estimate(0.8, 0.7, 0.9, 20), Control("c", 0.5), size=1.1) == "reproduced"


def test_a_malformed_entry_is_refused_and_deviations_are_listed():
    with pytest.raises(ValueError, match="'control' is missing"):
        registry(bad=entry(control=""))
    with pytest.raises(ValueError, match="comparison"):
        registry(bad=entry(comparison="marginal"))
    with pytest.raises(ValueError, match="unknown fields"):
        registry(bad=entry(colour="red"))
    with pytest.raises(ValueError, match="date, a reason"):
        registry(bad=entry(deviations=[{"date": "2026-12-04"}]))
    changed = registry(x=entry(deviations=[{"date": "2026-12-04", "reason": "a stronger control", "was": "chance"}]))
    assert changed.deviations().to_dict("records") == [
        {"chapter": "99_test", "id": "x", "date": "2026-12-04", "reason": "a stronger control", "was": "chance"}
    ]


def test_every_claim_and_finding_names_the_quantity_its_figure_is():
    with pytest.raises(ValueError, match="99_test/bare: 'quantity' is missing: name what the figure is"):
        registry(bare=entry(quantity=""))
    with pytest.raises(ValueError, match="'quantity' is missing"):
        registry(bare={k: v for k, v in entry(kind="finding").items() if k != "quantity"})
    with pytest.raises(ValueError, match="at most 80 characters"):
        registry(long=entry(quantity="the share of the raw attention " * 3))
    named = registry(x=entry(quantity="  Spearman correlation "))
    assert named.quantity("99_test", "x") == "Spearman correlation"
    assert named.quantity("99_test", "a-check") == ""
    book = load_registry()
    assert all(e.quantity for e in book.entries.values())
    assert book.quantity("04_effective_attention", "sink-is-special").endswith("(fraction)")


def test_the_books_registry_parses_and_says_when_each_entry_was_registered():
    book = load_registry()
    assert len(book.entries) > 50
    for e in book.entries.values():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", e.registered), e
        assert e.status in ("confirmatory", "exploratory")


def _committed_record(notebook: Path) -> dict:
    return committed_record(notebook)


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_every_committed_record_is_registered_and_every_entry_recorded(notebook):
    """The registry and the committed scoreboard define the same claims: none is added unregistered,
    none registered and silently dropped."""
    book = load_registry()
    recorded = {(c["id"], c["kind"]) for c in _committed_record(notebook)["claims"] if c["kind"] != "check"}
    registered = {(e.id, e.kind) for e in book.chapter(notebook.stem)}
    assert recorded - registered == set(), f"{notebook.name}: recorded but not registered"
    assert registered - recorded == set(), f"{notebook.name}: registered but not recorded: remove or record them"
    statuses = {c["id"]: c.get("status") for c in _committed_record(notebook)["claims"] if c["kind"] != "check"}
    for e in book.chapter(notebook.stem):
        assert statuses[e.id] == e.status, f"{notebook.name}: {e.id} was recorded before its registry entry changed"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_no_chapter_bypasses_the_registry(notebook):
    source = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])
    assert not re.search(r"Claims\([^)]*registry\s*=", source), f"{notebook.name} passes its own registry"


def test_a_claim_carried_to_another_model_names_a_paper_claim_of_another_chapter():
    def two_chapters(carrier):
        return parse_registry({"chapters": {"05_enc": {"c": entry()}, "09_dec": {"d": carrier}}})

    assert two_chapters(entry(carries="05_enc/c")).carried() == {("09_dec", "d"): ("05_enc", "c")}
    with pytest.raises(ValueError, match="does not define"):
        two_chapters(entry(carries="05_enc/missing"))
    with pytest.raises(ValueError, match="'<chapter>/<id>'"):
        two_chapters(entry(carries="c"))
    with pytest.raises(ValueError, match="only a paper claim"):
        two_chapters(entry(kind="finding", carries="05_enc/c"))
    with pytest.raises(ValueError, match="another chapter"):
        parse_registry({"chapters": {"05_enc": {"c": entry(), "e": entry(carries="05_enc/c")}}})
    # the book's decoder chapter carries its identifiability and attribution claims over from the encoders'
    carried = load_registry().carried()
    assert carried[("09_decoder_llm", "ident-linear-last")] == ("05_token_identifiability", "last-layer-most")
    assert {target[0] for target in carried.values()} == {"05_token_identifiability", "06_hidden_token_attribution"}
