"""`scripts/faq_questions.py`: the Debian FAQ's sections read as questions and bodies,
written as a BEIR folder ragsift loads (a synthetic FAQ in its text layout)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ragsift.evaluation import load_beir
from tests.factories import load_script

NBSP = "\u00a0"
FAQ = f"""
                      The Debian GNU/Linux FAQ

1. Definitions and overview
    1.1. What is this FAQ?

Chapter{NBSP}1.{NBSP}Definitions and overview

1.1.{NBSP}What is this FAQ?

    This document answers common questions. See Section 2.1, “How do I
    install it from a disc?” for more.

1.2.{NBSP}OK, now I know what it is... what is Linux?!

    Linux is a kernel written by Linus Torvalds.

1.3.{NBSP}Authors

    People wrote this.

Chapter{NBSP}2.{NBSP}Installing

2.1.{NBSP}How do I install it from
a disc?

    Burn the image and boot the machine from it.

2.1.1.{NBSP}Older machines

    Boot from a floppy first.

2.2.{NBSP}Can I upgrade in place?

    Yes: change the sources and run the upgrade.
"""


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    faq = tmp_path / "faq.txt.gz"
    faq.write_bytes(gzip.compress(FAQ.encode("utf-8")))
    squad = tmp_path / "squad"
    squad.mkdir()
    qas = [{"id": f"t{i}", "question": f"Who won match {i}?"} for i in range(10)]
    data = {"data": [{"title": "Cup", "paragraphs": [{"context": "x", "qas": qas}]}]}
    (squad / "test-v2.0.json").write_text(json.dumps(data), encoding="utf-8")
    module = load_script("faq_questions")
    monkeypatch.setattr(module, "FAQ", faq)
    monkeypatch.setattr(module, "SQUAD", squad)
    return module


def test_sections_are_headings_and_bodies_without_quoted_cross_references(script) -> None:  # type: ignore[no-untyped-def]
    found = script.sections(FAQ)
    assert [(sid, head) for sid, head, _ in found] == [
        ("1.1", "What is this FAQ?"),
        ("1.2", "OK, now I know what it is... what is Linux?!"),
        ("1.3", "Authors"),
        ("2.1", "How do I install it from a disc?"),  # a wrapped heading, joined
        ("2.2", "Can I upgrade in place?"),
    ]
    bodies = {sid: body for sid, _, body in found}
    assert bodies["1.1"] == "This document answers common questions. See Section 2.1 for more."
    # a subsection joins its section, its heading without its number
    assert bodies["2.1"] == (
        "Burn the image and boot the machine from it. Older machines Boot from a floppy first."
    )


def test_the_folder_loads_with_questions_holes_and_off_topic_ones(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script.main(tmp_path / "whole", 0.0, 5)
    ds = load_beir(tmp_path / "whole", out_of_scope=tmp_path / "whole" / "out-of-scope.jsonl")
    assert ds.counts() == {"documents": 5, "in_scope": 4, "out_of_scope": 5}
    texts = {d.doc_id: d.text for d in ds.documents}
    assert all("?" not in text for text in texts.values())  # no heading in the corpus
    script.main(tmp_path / "holes", 0.5, 5)
    holed = load_beir(tmp_path / "holes")
    assert holed.counts() == {"documents": 3, "in_scope": 2, "near_miss": 2}
    kept = {d.doc_id for d in holed.documents}
    for q in holed.queries:
        assert q.relevant <= kept
    with pytest.raises(SystemExit, match="--holes must be in"):
        script.main(tmp_path / "bad", 1.0, 5)


PYTHON_PAGE = """:tocdepth: 2

===============
Programming FAQ
===============

.. only:: html

   .. contents::

General Questions
=================

Is there a debugger?
--------------------

Yes: :mod:`pdb`, see :func:`breakpoint` and `the IDLE page <https://example.org/idle>`_.
``python -m pdb`` starts it; :pep:`553` added the function.

.. index:: debugger

Can I make a binary?
--------------------

Use a :ref:`freezer <freeze-tools>`::

   freeze.py app.py

Style
-----

Follow PEP 8.
"""


def test_python_faq_sections_are_headings_and_bodies_as_text(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    found = script.rst_sections("programming", PYTHON_PAGE)
    assert [(sid, head) for sid, head, _ in found] == [
        ("programming.3", "Is there a debugger?"),
        ("programming.4", "Can I make a binary?"),
        ("programming.5", "Style"),
    ]  # the page title and the chapter have no body of their own
    bodies = {sid: body for sid, _, body in found}
    assert bodies["programming.3"] == (
        "Yes: pdb, see breakpoint and the IDLE page."
        " python -m pdb starts it; PEP 553 added the function."
    )
    assert bodies["programming.4"] == "Use a freezer:: freeze.py app.py"


def test_the_python_faq_folder_loads_and_a_missing_one_says_what_to_install(  # type: ignore[no-untyped-def]
    script, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pages = tmp_path / "faq"
    pages.mkdir()
    (pages / "programming.rst.txt").write_text(PYTHON_PAGE, encoding="utf-8")
    (pages / "index.rst.txt").write_text("Index?\n======\n\nPages.\n", encoding="utf-8")
    monkeypatch.setattr(script, "PYTHON_FAQ", pages)
    script.main(tmp_path / "py", 0.0, 3, "python")
    ds = load_beir(tmp_path / "py", out_of_scope=tmp_path / "py" / "out-of-scope.jsonl")
    assert ds.counts() == {"documents": 3, "in_scope": 2, "out_of_scope": 3}
    (pages / "programming.rst.txt").write_bytes(b"Why?\n====\n\nCaf\xe9.\n")
    with pytest.raises(SystemExit, match=r"programming\.rst\.txt: not UTF-8"):
        script.main(tmp_path / "latin1", 0.0, 3, "python")
    monkeypatch.setattr(script, "PYTHON_FAQ", tmp_path / "absent")
    with pytest.raises(SystemExit, match="apt-get install python3-doc"):
        script.main(tmp_path / "none", 0.0, 3, "python")


PERL_POD = """=head1 NAME

perlfaq4 - Data Manipulation

=head1 DESCRIPTION

This section answers questions about data.

=head1 Data: Numbers

=head2 Why is int() broken?
X<int> X<rounding>

Your C<int()> is most probably working just fine. See L<perlfunc/int>
and L<the rounding docs|perlop/"Rounding">, or use C<< $x <=> $y >>.

    printf("%.2f", $x);

=head2 How do I round E<lt>numbersE<gt>?

=over 4

=item sprintf

Use B<sprintf>; I<don't> write S<your own>.

=back

=head3 On big numbers

Use F<Math::BigFloat>.

=head1 AUTHOR

Not a question's body.
"""


def test_perl_faq_sections_are_head2s_with_pod_reduced_to_text(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pod = tmp_path / "pod"
    pod.mkdir()
    (pod / "perlfaq4.pod").write_text(PERL_POD, encoding="utf-8")
    (pod / "perlfaq.pod").write_text("=head2 The index?\n\nNot read.\n", encoding="utf-8")
    found = script.perl_sections(pod)
    assert [(sid, head) for sid, head, _ in found] == [
        ("perlfaq4.1", "Why is int() broken?"),
        ("perlfaq4.2", "How do I round <numbers>?"),
    ]
    bodies = {sid: body for sid, _, body in found}
    # index entries vanish, links keep their text or their page, C<< >> its inside
    assert bodies["perlfaq4.1"] == (
        "Your int() is most probably working just fine. See int and the rounding docs,"
        ' or use $x <=> $y. printf("%.2f", $x);'
    )
    # list items and subsections join the section; the AUTHOR head1 ends it
    assert bodies["perlfaq4.2"] == (
        "sprintf Use sprintf; don't write your own. On big numbers Use Math::BigFloat."
    )


def test_the_perl_faq_folder_loads_and_a_missing_one_says_what_to_install(  # type: ignore[no-untyped-def]
    script, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pod = tmp_path / "pod"
    pod.mkdir()
    (pod / "perlfaq4.pod").write_text(PERL_POD, encoding="utf-8")
    monkeypatch.setattr(script, "PERL_FAQ", pod)
    script.main(tmp_path / "pl", 0.0, 3, "perl")
    ds = load_beir(tmp_path / "pl", out_of_scope=tmp_path / "pl" / "out-of-scope.jsonl")
    assert ds.counts() == {"documents": 2, "in_scope": 2, "out_of_scope": 3}
    assert all("C<" not in d.text and "X<" not in d.text for d in ds.documents)
    (pod / "perlfaq4.pod").write_bytes(b"=head2 Why?\n\nCaf\xe9.\n")
    with pytest.raises(SystemExit, match=r"perlfaq4\.pod: not UTF-8"):
        script.main(tmp_path / "latin1", 0.0, 3, "perl")
    monkeypatch.setattr(script, "PERL_FAQ", tmp_path / "absent")
    with pytest.raises(SystemExit, match="apt-get install perl-doc"):
        script.main(tmp_path / "none", 0.0, 3, "perl")
