"""The scoreboard: three kinds of record, verdicts from intervals and controls, the records the report reads."""

import json

import numpy as np
import pytest
import torch

import helpers
from helpers.book import claims as claims_module
from helpers.book.claims import ClaimFailed, Control, load_records, record_defects, report_table
from helpers.methods.intervals import Estimate


def Claims(chapter, **options):  # noqa: N802 (the class, with no registry, for scratch chapters)
    return claims_module.Claims(chapter, registry=None, **options)


def estimate(value, low, high, sequences=20):
    return Estimate(value, low, high, sequences)


def test_a_failed_check_stops_the_chapter_in_strict_mode(tmp_path):
    claims = Claims("99_test", model="tiny", mode="strict")
    assert claims.check("holds", "an identity that holds", True, measured="below 1e-6")
    with pytest.raises(ClaimFailed, match="check fails fails of 99_test: an identity that does not"):
        claims.check("fails", "an identity that does not", np.bool_(False), measured="0.1")


def test_report_mode_marks_a_failed_check_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_CLAIMS", "report")
    claims = Claims("99_test")
    assert not claims.check("fails", "does not hold", torch.tensor(False))
    board = claims.enforce(tmp_path)
    assert board.frame.set_index("id").loc["fails", "verdict"] == "fails"
    assert "0 of 1 checks pass; failing: fails." in repr(board)
    rows = report_table(load_records(tmp_path))
    assert rows.chapter.tolist() == ["99_test"] and rows["kind"].tolist() == ["check"]


def test_the_verdict_comes_from_the_interval_and_the_control():
    claims = Claims("99_test", mode="strict")
    chance = Control("a random column space of the same rank", 0.5)
    clear = estimate(0.8, 0.7, 0.9)
    straddles = estimate(0.6, 0.45, 0.75)
    below = estimate(0.3, 0.2, 0.4)
    assert claims.paper("clears", "most is removed", clear, chance) == "reproduced"
    # an interval that contains its bound decides nothing: inconclusive, never a failure
    assert claims.paper("straddles", "most is removed", straddles, chance) == "inconclusive"
    assert claims.paper("reversed", "most is removed", below, chance) == "not reproduced"
    # the size tolerance is the rule's (a tenth of the published figure): 1.2 lies outside [0.7, 0.9] +- 0.12
    assert claims.paper("size", "most is removed", clear, chance, size=1.2) == "in direction only"
    # the published size is compared with the interval widened by the tolerance, not with the point
    assert claims.paper("size-ok", "most is removed", clear, chance, size=0.97) == "reproduced"
    assert claims.paper("side", "less is removed", below, chance, side="below") == "reproduced"
    assert claims.finding("mine", "my finding", straddles, chance) == "inconclusive"
    assert claims.finding("mine-2", "my finding", clear, chance) == "holds"
    assert claims.finding("mine-3", "my finding", below, chance) == "does not hold"
    # a control measured on other sequences: the claim must clear the control's far edge
    noisy = Control("position 1", estimate(0.6, 0.5, 0.68))
    assert claims.paper("noisy", "more than at position 1", clear, noisy) == "reproduced"
    assert claims.paper("noisy-2", "more than at position 1", estimate(0.75, 0.66, 0.8), noisy) == "inconclusive"
    assert claims.paper("noisy-3", "more than at position 1", estimate(0.3, 0.2, 0.45), noisy) == "not reproduced"
    # a threshold from the paper is read beside the control: both must clear
    assert claims.paper("paper-bound", "above 0.75", clear, chance, threshold=0.75) == "inconclusive"
    assert claims.paper("paper-bound-2", "above 0.95", clear, chance, threshold=0.95) == "not reproduced"
    assert claims.paper("loose-bound", "above 0.1", straddles, chance, threshold=0.1) == "inconclusive"
    with pytest.raises(TypeError, match="registry"):
        claims.paper("old-size", "a size with its own tolerance", clear, chance, size=(0.97, 0.05))
    by_id = {c.id: c for c in claims.claims}
    assert by_id["reversed"].note.startswith("reversed")
    assert not by_id["straddles"].note and not by_id["paper-bound-2"].note  # clears the control, not the bound
    assert by_id["clears"].measured == "0.80 [0.70, 0.90] over 20 sequences"
    assert by_id["clears"].control == "a random column space of the same rank: 0.50"
    assert by_id["clears"].comparison == "fixed" and by_id["noisy"].comparison == "independent"
    assert "paper's bound [0.7, 0.9] contains 0.75" in by_id["paper-bound"].reading
    assert by_id["size"].tolerance == "±0.12 of 1.20" and by_id["size"].published == "1.20"
    assert claims.not_testable("no", "needs d_v = 64", "the bundled model has d_v = 32") == "not testable here"
    assert record_defects(claims.record()) == []


def test_a_paired_control_is_read_by_the_paired_difference():
    """The referee's case: marginal intervals overlap, the per-sequence difference clears."""
    rng = np.random.default_rng(0)
    shared = rng.normal(0.5, 0.1, 30)  # what the sequences share: both figures move with it
    control = shared
    values = shared + 0.03 + rng.normal(0, 0.01, 30)
    marginal, own = helpers.bootstrap(values), helpers.bootstrap(control)
    assert marginal.low < own.high  # the two marginal intervals overlap
    paired = Control.paired("the same sequences without the effect", values, control)
    assert paired.comparison == "paired" and paired.difference.low > 0
    claims = Claims("99_test", mode="report")
    assert claims.paper("paired", "above the control", marginal, paired) == "reproduced"
    assert claims.paper("unpaired", "above the control", marginal, Control("the same, unpaired", own)) == (
        "inconclusive"
    )
    # a paired difference whose interval contains zero: inconclusive, not "not reproduced"
    noise = shared + rng.normal(0, 0.05, 30)
    equal = Control.paired("an equally good control", noise, shared)
    assert equal.difference.low < 0 < equal.difference.high
    assert claims.paper("null", "above the control", helpers.bootstrap(noise), equal) == "inconclusive"
    # a paired difference wholly on the other side: not reproduced, reversed
    worse = Control.paired("a better control", shared - 0.05, shared)
    assert claims.finding("worse", "above", helpers.bootstrap(shared - 0.05), worse) == "does not hold"
    record = {c.id: c for c in claims.claims}
    assert record["worse"].note.startswith("reversed")
    assert "paired difference" in record["paired"].control and len(record["paired"].difference) == 2
    # the estimate and the paired control must rest on the same sequences
    with pytest.raises(ValueError, match="same sequences|sequences"):
        claims.paper("mismatch", "x", helpers.bootstrap(values[:20]), paired)
    assert record_defects(claims.record()) == []


def test_few_sequences_and_an_absent_premise_are_counted_apart():
    claims = Claims("99_test", mode="report")
    few = estimate(0.8, 0.7, 0.9, sequences=9)
    assert claims.paper("few", "a claim on 9 texts", few, Control("chance", 0.5)) == "too few sequences"
    assert "fewer than the 10" in claims.claims[-1].note and "clears" in claims.claims[-1].note
    assert claims.finding("few-f", "a finding on 9 texts", few, Control("chance", 0.5)) == "too few sequences"
    absent = claims.paper(
        "premise", "the separator's share", estimate(0.8, 0.7, 0.9), Control("chance", 0.5),
        premise=(False, "the sink is the start token, not the separator"),
    )  # fmt: skip
    assert absent == "premise absent" and claims.claims[-1].note.startswith("premise absent: the sink")
    with pytest.raises(ValueError, match="premise"):
        claims.finding("f-premise", "x", estimate(0.8, 0.7, 0.9), Control("c", 0.5), premise=(False, "x"))
    assert record_defects(claims.record()) == []


def test_decide_reads_each_comparison():
    from helpers.book.verdicts import compare, decide

    assert compare(0.1, 0.2, 0.0, "above") == "clears" and compare(-0.2, -0.1, 0.0, "above") == "against"
    assert compare(-0.1, 0.1, 0.0, "below") == "contains" and compare(-0.2, -0.1, 0.0, "below") == "clears"
    e = estimate(0.8, 0.7, 0.9)
    assert decide("paper", e, "above", control=0.5).verdict == "reproduced"
    assert decide("paper", e, "above", control_interval=(0.75, 0.95)).verdict == "inconclusive"
    assert decide("paper", e, "above", control_interval=(0.95, 0.99)).verdict == "not reproduced"
    with pytest.raises(ValueError, match="exactly one"):
        decide("paper", e, "above", control=0.5, control_interval=(0.1, 0.2))
    with pytest.raises(ValueError, match="same sequences"):
        decide("paper", e, "above", difference=estimate(0.1, 0.05, 0.2, sequences=12))


def test_bad_registrations_are_refused():
    claims = Claims("99_test", mode="report")
    chance = Control("chance", 0.1)
    with pytest.raises(TypeError, match="boolean"):
        claims.check("a", "a claim", 0.7)
    with pytest.raises(TypeError, match="one boolean"):
        claims.check("a", "a claim", torch.tensor([True, False]))
    with pytest.raises(ValueError, match="lower-case"):
        claims.check("Bad Id", "a claim", True)
    with pytest.raises(TypeError, match="Estimate"):
        claims.paper("bare", "a bare number", 0.7, chance)
    with pytest.raises(TypeError, match="Control"):
        claims.paper("no-control", "no control", estimate(0.7, 0.6, 0.8), 0.1)
    with pytest.raises(ValueError, match="side"):
        claims.paper("side", "a side", estimate(0.7, 0.6, 0.8), chance, side="beyond")
    with pytest.raises(ValueError, match="description"):
        Control("", 0.1)
    with pytest.raises(ValueError, match="say why"):
        claims.not_testable("why", "a claim", " ")
    claims.check("a", "a claim", True)
    with pytest.raises(ValueError, match="already registered"):
        claims.check("a", "again", True)
    with pytest.raises(ValueError, match="BOOK_CLAIMS"):
        Claims("x", mode="lenient")
    with pytest.raises(ValueError, match="no claims"):
        Claims("x", mode="report").enforce()


def test_a_record_that_cannot_fail_or_has_no_control_is_a_defect(tmp_path):
    claims = Claims("99_test", mode="report")
    claims.paper("fine", "a claim", estimate(0.8, 0.7, 0.9), Control("chance", 0.5))
    good = claims.record()
    assert record_defects(good) == []
    bad = json.loads(json.dumps(good))
    row = bad["claims"][0]
    row["control_value"] = 0.9  # the control would pass a claim whose bound is 0.5
    assert "cannot fail" in record_defects(bad)[0]
    row.update(control="", control_value=0.5)
    assert "without a control" in record_defects(bad)[0]
    row.update(control="chance: 0.5", interval=[])
    assert "without an interval" in record_defects(bad)[0]
    row.update(interval=[0.7, 0.9], verdict="in kind")
    assert "verdict 'in kind'" in record_defects(bad)[0]
    # enforce refuses a defective record before writing it
    claims._claims["fine"] = claims._claims["fine"].__class__(**{**row, "verdict": "reproduced", "control": ""})
    with pytest.raises(ValueError, match="without a control"):
        claims.enforce(tmp_path)


def test_the_scoreboard_shows_three_kinds_and_is_stable():
    claims = Claims("99_test", mode="report")
    claims.paper(
        "a-claim", "A <b> claim & more", estimate(0.8, 0.7, 0.9), Control("chance", 0.5), source="Someone 2021"
    )
    claims.finding("b-finding", "a finding", estimate(0.2, 0.1, 0.3), Control("prior", 0.5), side="below")
    claims.check("c-check", "an identity", True)
    claims.check("d-check", "another identity", True)
    board = helpers.book.scoreboard.Scoreboard(claims.table().reset_index(), record=claims.record())
    html = board._repr_html_()
    assert html == board._repr_html_()  # no random ids: nbval compares it
    assert html.index("The paper's claims") < html.index("The book's findings") < html.index("All 2 checks pass.")
    assert "A &lt;b&gt; claim &amp; more" in html and "Someone 2021" in html
    assert '<td class="verdict yes">reproduced</td>' in html and '<td class="verdict yes">holds</td>' in html
    assert "c-check, d-check" in html
    data, metadata = board._repr_mimebundle_()
    assert data["text/html"] == html and "a-claim (paper): reproduced" in data["text/plain"]
    assert metadata["application/vnd.book.claims+json"]["chapter"] == "99_test"


def test_the_report_counts_paper_claims_findings_and_checks_apart(tmp_path):
    for chapter, figures in (("01_a", [(0.8, 0.7, 0.9), (0.4, 0.3, 0.6)]), ("02_b", [(0.9, 0.8, 0.95)])):
        claims = Claims(chapter, mode="report")
        for k, figure in enumerate(figures):
            claims.paper(f"p{k}", "a claim", estimate(*figure), Control("chance", 0.5))
        claims.finding("f", "a finding", estimate(0.8, 0.7, 0.9), Control("chance", 0.5))
        claims.check("c", "an identity", True)
        claims.save(tmp_path)
    report = report_table(load_records(tmp_path))
    scoreboard = helpers.book.scoreboard
    counts = scoreboard.verdict_counts(report)
    assert counts.loc["01_a"].tolist() == [2, 1, 0, 1, 0, 0, 0, 0] and counts.loc["all", "claims"] == 3
    findings = scoreboard.verdict_counts(report, kind="finding")
    assert findings.loc["all"].tolist() == [2, 2, 0, 0, 0, 0]
    assert scoreboard.check_counts(report) == (2, 2)
    html = scoreboard.verdict_html(counts, links={"01_a": "01_a.html"})
    assert '<a href="01_a.html">01_a</a>' in html and "<strong>all</strong>" in html
    departures = scoreboard.departures_html(report, links={"01_a": "01_a.html"})
    assert departures.count("<li>") == 1 and "<em>inconclusive</em>. A claim." in departures
    assert "Here: 0.40 [0.30, 0.60]" in departures and "the interval contains its bound" in departures
    assert scoreboard.departures_html(report[report.verdict == "reproduced"]) == "<p>None.</p>"


def test_a_departure_reads_as_sentences():
    row = {
        "claim": "of the special tokens, [SEP] draws the most raw attention",
        "verdict": "not reproduced",
        "published": "[SEP] in the middle and late layers",
        "here": "-0.26 [-0.27, -0.25] over 115 sequences",
        "control": "no difference between [SEP] and [CLS]: 0.00",
        "note": "reversed: the interval lies on the other side of the control; this model's sink is [CLS]",
    }
    text = helpers.book.scoreboard.departure_sentences(row)
    assert text == (
        "Of the special tokens, [SEP] draws the most raw attention. Published: [SEP] in the middle and late "
        "layers. Here: -0.26 [-0.27, -0.25] over 115 sequences; the control, no difference between [SEP] "
        "and [CLS], gives 0.00, and the interval lies on the other side of the control. This model's sink is [CLS]."
    )
    sink = {**row, "note": "", "control": "position 1: 0.003 [0.001, 0.005] (bound 0.500, from the paper)"}
    assert helpers.book.scoreboard.departure_sentences(sink).endswith(
        "the control, position 1, gives 0.003 [0.001, 0.005], and the interval lies wholly on the other side "
        "of the published bound, 0.500."
    )
    # an inconclusive verdict names the interval that contains what: the paper's bound, or zero for a paired one
    open_bound = {**sink, "verdict": "inconclusive", "control": "random: 0.43 [0.30, 0.57]; paired difference 0.13 "
                  "[0.10, 0.16] (bound 0.5, from the paper)"}  # fmt: skip
    assert helpers.book.scoreboard.departure_sentences(open_bound).endswith(
        "this model's interval contains the published bound, 0.5, so it decides neither way."
    )
    open_paired = {**open_bound, "control": "random: 0.43 [0.30, 0.57]; paired difference 0.01 [-0.02, 0.04]"}
    assert helpers.book.scoreboard.departure_sentences(open_paired).endswith(
        "the paired difference's interval contains zero, so it decides neither way."
    )
    open_threshold = {**open_bound, "control": "random: 0.43 [0.30, 0.57]; paired difference 0.13 [0.10, 0.16]"}
    assert helpers.book.scoreboard.departure_sentences(open_threshold).endswith(
        "the paired difference clears the control, but this model's interval contains the claim's threshold, so it "
        "decides neither way."
    )
    untestable = {**row, "verdict": "not testable here", "here": "", "note": "no tagger offline"}
    assert helpers.book.scoreboard.departure_sentences(untestable).endswith("No tagger offline.")
    # a semicolon inside parentheses does not end a sentence
    nested = {
        **untestable,
        "note": "not its sink (layers 3 to 6; sink-is-special is not reproduced); see model-sink-null",
    }
    assert helpers.book.scoreboard.departure_sentences(nested).endswith(
        "Not its sink (layers 3 to 6; sink-is-special is not reproduced). See model-sink-null."
    )


def test_records_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_CLAIMS_DIR", str(tmp_path / "records"))
    assert helpers.book.claims.records_dir() == tmp_path / "records"


def test_each_claim_links_the_section_that_tests_it(tmp_path, monkeypatch):
    cells = [
        {"cell_type": "markdown", "source": ["# Title\n", "\n", "## Raw vs effective: the [CLS] case\n"]},
        {"cell_type": "code", "source": ['claims.check("a-claim", "...", True)\n']},
        {"cell_type": "markdown", "source": ["## Second part\n"]},
        {"cell_type": "code", "source": ['claims.paper(\n    "b.claim", "...", e, c\n)\n']},
        {"cell_type": "markdown", "source": ["## Third part\n"]},
        {"cell_type": "code", "source": ['ordering(\n    "c-claim", "...", (1, 0))\n']},
    ]
    (tmp_path / "99_test.ipynb").write_text(json.dumps({"cells": cells}))
    sections = helpers.book.scoreboard.claim_sections(tmp_path / "99_test.ipynb")
    assert sections == {"a-claim": "raw-vs-effective-the-cls-case", "b.claim": "second-part"}
    # a claim registered through a chapter's own function is found by its id
    with_ids = helpers.book.scoreboard.claim_sections(tmp_path / "99_test.ipynb", ids={"b.claim", "c-claim"})
    assert with_ids == {"b.claim": "second-part", "c-claim": "third-part"}
    assert helpers.book.scoreboard.claim_sections(tmp_path / "missing.ipynb") == {}
    monkeypatch.chdir(tmp_path)
    claims = Claims("99_test", mode="report")
    claims.paper("b.claim", "the claim", estimate(0.8, 0.7, 0.9), Control("chance", 0.5))
    board = claims.enforce(tmp_path / "records")
    assert 'href="#second-part"' in board._repr_html_()
    record = json.loads((tmp_path / "records" / "99_test.json").read_text())
    assert record["claims"][0]["section"] == "second-part"


def test_chapter_title_reads_the_number_and_the_heading(tmp_path):
    path = tmp_path / "04_x.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["# Effective attention\n", "text"]}]}))
    assert helpers.book.scoreboard.chapter_title(path) == "4. Effective attention"
    (tmp_path / "05_y.ipynb").write_text(json.dumps({"cells": []}))
    with pytest.raises(ValueError, match="heading"):
        helpers.book.scoreboard.chapter_title(tmp_path / "05_y.ipynb")


def test_a_claim_whose_brackets_differ_between_two_models_is_written_once():
    from helpers.book.records import merged_claim, model_comparison

    first = "in the middle and late layers (layers 3 to 6), [SEP] draws more raw attention than [CLS]"
    second = "in the middle and late layers (layers 5 to 12), [SEP] draws more raw attention than [CLS]"
    assert merged_claim(first, second) == (
        "in the middle and late layers (layers 3 to 6 / layers 5 to 12), [SEP] draws more raw attention than [CLS]"
    )
    assert merged_claim(first, first) == first
    assert merged_claim("a b", "a c") == "a b [the second model: a c]"

    def records(model, claim):
        return [
            {
                "chapter": "04_x",
                "model": model,
                "claims": [{"id": "c", "kind": "paper", "claim": claim, "verdict": "reproduced", "measured": "1"}],
            }
        ]

    table = model_comparison(records("m1", first), records("m2", second))
    assert table.loc[0, "claim"] == merged_claim(first, second) and table.loc[0, "holds"] == 2


def test_the_model_comparison_has_a_column_per_model_and_counts_only_the_two_encoders(tmp_path):
    from helpers.book.records import extra_records, model_comparison, model_comparison_html

    def record(chapter, model, **verdicts):
        claims = [{"id": i, "kind": "paper", "claim": f"claim {i}", "verdict": v, "measured": f"{i} figure"}
                  for i, v in verdicts.items()]  # fmt: skip
        return {"chapter": chapter, "model": model, "claims": claims}

    small = [record("05_x", "small", a="reproduced", b="not reproduced")]
    large = [record("05_x", "large", a="in direction only", b="premise absent")]
    decoder = [record("09_y", "decoder", d="not reproduced", e="reproduced")]
    table = model_comparison(small, large, decoder, carried={("09_y", "d"): ("05_x", "a")})
    assert table.attrs == {"encoders": ["small", "large"], "models": ["small", "large", "decoder"]}
    assert table["holds"].tolist() == [2, "apart"]  # the decoder's verdict is shown, not counted
    assert table["decoder"].tolist() == ["not reproduced", ""]  # e carries nothing: b's row stays empty
    assert table.loc[0, "decoder: figure"] == "d: d figure"
    html = model_comparison_html(table)
    assert html.count("<th>") == 5 and "not tested" in html
    # a run supplied from elsewhere: a folder of <chapter>.json, one column per model in it
    for r in small + [record("05_x", "bert-base-uncased", a="inconclusive")]:
        (tmp_path / f"{r['model']}.json").write_text(json.dumps(r))
    with pytest.raises(ValueError, match="given twice"):
        model_comparison(small, large, *extra_records(tmp_path), carried={})
    (tmp_path / "small.json").unlink()
    table = model_comparison(small, large, *extra_records(tmp_path), carried={})
    assert table["bert-base-uncased"].tolist() == ["inconclusive", ""]
    (tmp_path / "notes.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a chapter record"):
        extra_records(tmp_path)
    with pytest.raises(FileNotFoundError, match="no folder of records"):
        extra_records(tmp_path / "absent")
    with pytest.raises(ValueError, match="one model's records"):
        model_comparison(small, large, small + large, carried={})


def test_the_model_comparison_sets_the_findings_side_by_side_too():
    from helpers.book.records import model_comparison

    def record(model, verdict, kind):
        claim = {"id": "f", "kind": kind, "claim": "a finding", "verdict": verdict, "measured": "0.1"}
        return [{"chapter": "06_x", "model": model, "claims": [claim]}]

    found = model_comparison(record("m1", "holds", "finding"), record("m2", "holds", "finding"), kind="finding")
    assert found.loc[0, "id"] == "f" and found.loc[0, "holds"] == 2
    assert model_comparison(record("m1", "holds", "finding"), record("m2", "holds", "finding")).empty  # papers only
    with pytest.raises(ValueError, match="checks have no verdict"):
        model_comparison(record("m1", "passes", "check"), record("m2", "passes", "check"), kind="check")
