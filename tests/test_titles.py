"""Titles people recognise (issue 43): a metadata title that is a real title, else an
e-mail's subject, the first heading, a presentation's first line, then the file name."""

from __future__ import annotations

import pytest

from conftest import shared_docs
from surrealdocs import Settings
from surrealdocs.parts.extract import extract_file
from surrealdocs.parts.titles import file_name, real_title, title_for


def test_metadata_titles_that_are_not_titles_are_passed_over() -> None:
    src = "/docs/report.pdf"
    for fake in ("loremipsum.jpg", "Slide 1", "Untitled", "Document1", "report",
                 "report.pdf", "PowerPoint Presentation", "   ", "1234", None, 42):
        assert real_title(fake, src) is None, fake
    assert real_title("Microsoft Word - Annual Budget 2024", src) == "Annual Budget 2024"
    assert real_title("  The  Digital\nMillennium Act ", src) == "The Digital Millennium Act"
    assert len(real_title("x" * 500, src) or "") == 200


def test_the_title_falls_back_in_order() -> None:
    assert title_for("/d/a.pdf", "application/pdf", {"title": "Real Title"}, [], "") \
        == "Real Title"
    mail = {"subject": "Quarterly numbers", "from_email": "a@b.c"}
    assert title_for("/d/m.eml", "message/rfc822", mail, [], "Hi") == "Quarterly numbers"
    assert title_for("/d/a.pdf", "application/pdf", {"subject": "not a title here"}, [],
                     "") == "a.pdf"  # a PDF's subject is a description
    assert title_for("/d/n.md", "text/markdown", {}, [(1, "Installing"), (2, "Linux")],
                     "") == "Installing"
    slides = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    assert title_for("/d/s.pptx", slides, {"title": "Slide 1"}, [],
                     "\nMission Control\nmore text") == "Mission Control"
    assert title_for("upload://dir/notes.txt", "text/plain", {}, [], "x") == "notes.txt"
    assert title_for("note://1", "text/plain", {}, [], "x") is None
    assert file_name("beir:42") is None and file_name("C/x/y.txt") == "y.txt"


@pytest.mark.parametrize(("path", "title"), [
    ("eml/fake-email-attachment.eml", "Fake email with attachment"),
    ("pptx/science-exploration-1p.pptx",
     "GSFC: Sciences and Exploration Directorate Virtual Machine Environment Scorecard"),
    ("pdf/fake-memo.pdf", "fake-memo.pdf"),  # its metadata title is its file name
    ("pdf/dmca.pdf", "The Digital Millennium Copyright Act of 1998"),
    ("md/README.md", "Example Docs"),
])
async def test_titles_of_real_files(path: str, title: str) -> None:
    file = shared_docs() / path
    outcome = await extract_file(file, Settings(db="mem://"), source=str(file))
    assert getattr(outcome, "title", None) == title
