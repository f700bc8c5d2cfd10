"""The search page in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``; ``.ci/run`` installs them) driven by Selenium against ``surrealdocs
serve`` on loopback. Nothing is downloaded at run time; without the browser the test is
skipped.

Screenshots go to ``tests/artifacts/`` (git-ignored): the results of a search and a
document opened at a hit, on a laptop-sized window and on a phone-sized one.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
webdriver = pytest.importorskip("selenium.webdriver")

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from server_helpers import served, wait_ready_process  # noqa: E402
from surrealdocs import KnowledgeBase  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="no headless browser: apt-get install -y chromium chromium-driver")]

HERONS = """# Herons of the marsh

Herons are long-legged wading birds of fresh and coastal water.

The grey heron stands motionless in shallow water, waiting for a fish to come close, then
strikes with its dagger-like bill. It nests in colonies called heronries, high in the trees.

Purple herons prefer dense reed beds, where their striped necks make them hard to see.
"""
# long enough for several chunks, so that the hit is one passage in the middle of the text
EGRETS = "\n\n".join([
    "# Egrets\n\nEgrets are herons too, most of them white. They were hunted for their "
    "breeding plumes in the nineteenth century, and the first bird protection societies were "
    "founded to stop that trade. Milliners paid more for an ounce of plumes than for an ounce "
    "of gold, and whole colonies were shot out in a single season.",
    "Cattle egrets follow grazing animals across dry pasture, catching the insects that the "
    "hooves disturb. They spread from Africa to every continent but Antarctica in the last "
    "century, crossing the Atlantic on their own and reaching the Americas around 1877. Today "
    "they nest in noisy colonies, often with night herons and ibises, in trees over water.",
    "The little egret is easy to tell apart: black legs and bright yellow feet. It stirs the "
    "mud with its feet to flush out small fish and shrimps, then stabs at them.",
    "Great egrets are almost as tall as grey herons and fish alone, slowly, in open water. In "
    "the breeding season a patch of bare skin on the face turns a vivid lime green, and long "
    "lacy plumes grow from the back. The species is the emblem of the National Audubon "
    "Society, founded to protect wading birds from the plume hunters.",
    "Snowy egrets of the Americas have black bills and run through the shallows, shuffling "
    "and flicking their wings to startle prey. They often feed in mixed flocks with ibises "
    "and spoonbills, and defend a feeding spot with raised crests and harsh calls against "
    "any bird that comes too close.",
]) + "\n"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
                f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path)}", "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def until(driver: Any, condition: Any, timeout: float = 30) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)


def shot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    return path


def stat(driver: Any, name: str) -> str | None:
    value = driver.execute_script("""
        for (const dt of document.querySelectorAll('#stats dt'))
            if (dt.textContent === arguments[0]) return dt.nextElementSibling.textContent;
        return null;""", name)
    return None if value is None else str(value)


def texts(driver: Any, selector: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]


def test_page_upload_search_open(tmp_path: Path, browser: Any) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "herons.md").write_text(HERONS)
    (files / "egrets.txt").write_text(EGRETS)
    (files / "broken.pdf").write_bytes(b"%PDF-1.7 not really a PDF")
    db = str(tmp_path / "db")
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        d = browser
        d.get(url + "/")
        until(d, lambda d: "Documents" in d.find_element(By.ID, "stats").text)
        assert d.find_element(By.ID, "key-button").is_displayed() is False  # loopback, no keys
        assert d.find_element(By.ID, "empty").is_displayed()

        # upload through the file picker: one row per file, each with its outcome
        d.find_element(By.ID, "file-input").send_keys(
            "\n".join(str(files / n) for n in ("herons.md", "egrets.txt", "broken.pdf")))
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".upload[data-status]")) == 3)
        rows = {r.get_attribute("data-name"): r
                for r in d.find_elements(By.CSS_SELECTOR, ".upload")}
        assert rows["herons.md"].get_attribute("data-status") == "ingested"
        assert rows["egrets.txt"].get_attribute("data-status") == "ingested"
        assert rows["broken.pdf"].get_attribute("data-status") == "failed"
        reason = rows["broken.pdf"].find_element(By.CSS_SELECTOR, ".upload-reason").text
        assert reason  # the failure is named with its reason
        until(d, lambda d: stat(d, "Documents") == "2")

        # a file dropped on the drop zone (a synthetic drop: what the browser hands over)
        d.execute_script("""
            const data = new DataTransfer();
            data.items.add(new File(["Storks build huge nests on chimneys and church roofs."],
                                    "storks.txt", {type: "text/plain"}));
            const zone = document.getElementById("dropzone");
            zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: data, bubbles: true}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true}));
        """)
        until(d, lambda d: d.find_elements(
            By.CSS_SELECTOR, '.upload[data-name="storks.txt"][data-status="ingested"]'))
        assert len(d.find_elements(By.CSS_SELECTOR, '.upload[data-name="storks.txt"]')) == 1

        # a notebook made on the page appears in both selectors; the upload target stays
        # what it was (it changed silently before), and the page says how to pick it
        d.find_element(By.ID, "new-notebook").click()
        d.find_element(By.ID, "notebook-name").send_keys("Waders", Keys.ENTER)
        until(d, lambda d: "Waders" in texts(d, "#notebooks .nb")[0] if texts(
            d, "#notebooks .nb") else False)
        assert "Waders" in [o.text for o in d.find_elements(By.CSS_SELECTOR, "#notebook option")]
        assert "Waders" in [o.text for o in d.find_elements(
            By.CSS_SELECTOR, "#upload-notebook option")]
        assert d.find_element(By.ID, "upload-notebook").get_attribute("value") == ""
        assert "Into notebook" in d.find_element(By.ID, "banner").text

        # search words (the text mode): "/" focuses the box; the little egret's passage
        # comes first, its words marked
        d.find_element(By.CSS_SELECTOR, '.modes [data-mode="text"]').click()
        d.find_element(By.TAG_NAME, "body").send_keys("/")
        box = d.switch_to.active_element
        assert box.get_attribute("id") == "q"
        box.send_keys("little egret yellow feet", Keys.ENTER)
        until(d, lambda d: "· text ·" in d.find_element(By.ID, "summary").text)
        first = d.find_elements(By.CSS_SELECTOR, ".hit")[0]
        assert "upload://egrets.txt" in first.text
        assert "black legs and bright yellow feet" in first.text
        marked = {m.text.lower() for m in first.find_elements(By.CSS_SELECTOR, "mark")}
        assert {"little", "egret", "yellow", "feet"} <= marked, marked
        score = first.find_element(By.CSS_SELECTOR, ".score").text  # how likely relevant
        assert score.endswith("%") and 0 < int(score[:-1]) <= 100
        assert "mode=text" in d.current_url and "q=little" in d.current_url
        assert not d.find_element(By.ID, "weaker-results").is_displayed()
        shot(d, "page-results.png")

        # a question the documents do not answer: nothing, said so, weaker matches on request
        d.find_element(By.CSS_SELECTOR, '.modes [data-mode="hybrid"]').click()
        box = d.find_element(By.ID, "q")
        box.clear()
        box.send_keys("recipe for banana bread", Keys.ENTER)
        until(d, lambda d: "looks relevant" in d.find_element(By.ID, "summary").text)
        assert d.find_elements(By.CSS_SELECTOR, ".hit") == []
        assert "cutoff=false" not in d.find_element(By.ID, "summary").text
        d.find_element(By.ID, "weaker-results").click()
        until(d, lambda d: "weaker matches shown" in d.find_element(By.ID, "summary").text
              or d.find_elements(By.CSS_SELECTOR, ".hit"))
        until(d, lambda d: not d.find_element(By.ID, "weaker-results").is_displayed())
        assert d.find_elements(By.CSS_SELECTOR, ".hit")  # the weaker matches
        shot(d, "page-weaker.png")
        d.find_element(By.CSS_SELECTOR, '.modes [data-mode="text"]').click()
        box = d.find_element(By.ID, "q")
        box.clear()
        box.send_keys("little egret yellow feet", Keys.ENTER)
        until(d, lambda d: "· text ·" in d.find_element(By.ID, "summary").text)

        # the mode switch searches again: hybrid finds the passage among its hits
        d.find_element(By.CSS_SELECTOR, '.modes [data-mode="hybrid"]').click()
        until(d, lambda d: "· hybrid ·" in d.find_element(By.ID, "summary").text)
        assert any("bright yellow feet" in t for t in texts(d, ".hit"))
        assert "text #1" in " ".join(texts(d, ".hit .hit-meta"))
        d.find_element(By.CSS_SELECTOR, '.modes [data-mode="text"]').click()
        until(d, lambda d: "· text ·" in d.find_element(By.ID, "summary").text)

        # open the hit: the document at its span, the chunk highlighted and in view
        d.find_elements(By.CSS_SELECTOR, ".hit")[0].click()
        chunk = until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#viewer[open] .chunk"))[0]
        assert "black legs and bright yellow feet" in chunk.text
        body = d.find_element(By.ID, "viewer-body").text
        assert "Egrets are herons too" in body[:40] and "Snowy egrets" in body  # all of it
        assert not body.startswith(chunk.text[:40])  # the passage is not at its start
        meta = d.find_element(By.ID, "viewer-meta").text
        assert "upload://egrets.txt" in meta and "passage 1 of" not in meta
        until(d, lambda d: d.execute_script("""
            const c = document.getElementById('current-chunk').getBoundingClientRect();
            const v = document.getElementById('viewer-body').getBoundingClientRect();
            return c.top >= v.top - 1 && c.top < v.bottom;"""))
        assert {m.text.lower() for m in chunk.find_elements(By.CSS_SELECTOR, "mark")} >= {
            "little", "yellow", "feet"}
        shot(d, "page-document.png")
        d.find_element(By.ID, "viewer-body").send_keys(Keys.ESCAPE)
        until(d, lambda d: not d.find_element(By.ID, "viewer").get_attribute("open"))

        # a phone-sized window: one column, the same results
        d.set_window_size(390, 844)
        d.refresh()
        until(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
        shot(d, "page-phone.png")
        assert d.execute_script("return document.documentElement.scrollWidth") <= 390
        logs = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
        assert not logs, logs


def test_page_asks_for_a_key_and_uses_it(tmp_path: Path, browser: Any) -> None:
    db = str(tmp_path / "db")

    async def make_key() -> str:
        async with await KnowledgeBase.open(db, model="hashing-64") as kb:
            await kb.ingest_texts({"note://cranes": "Cranes dance in the spring fields."})
            _, token = await kb.keys.create("browser", read_only=True)
            return token

    token = asyncio.run(make_key())
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        d = browser
        d.get(url + "/?q=cranes+dance")
        dialog = until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#key-dialog[open]"))[0]
        assert "needs an API key" in d.find_element(By.ID, "banner").text
        d.find_element(By.ID, "key-input").send_keys("sd_wrong")
        d.find_element(By.ID, "key-save").click()
        until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#key-dialog[open]"))
        assert "not accepted" in d.find_element(By.ID, "key-status").text
        shot(d, "page-key.png")
        field = d.find_element(By.ID, "key-input")
        field.clear()
        field.send_keys(token)
        d.find_element(By.ID, "key-save").click()
        until(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
        assert not dialog.get_attribute("open")
        assert "note://cranes" in d.find_element(By.CSS_SELECTOR, ".hit").text
        # a read-only key: the page offers no upload
        assert not d.find_element(By.ID, "upload-panel").is_displayed()
        assert "browser" in d.find_element(By.ID, "key-label").text
        # the key is remembered by this browser
        d.refresh()
        until(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
        assert not d.find_elements(By.CSS_SELECTOR, "#key-dialog[open]")


def _overflow(driver: Any) -> int:
    """How far the page, or a list in it, is wider than its box (0: no horizontal
    scrollbar anywhere), and whether every upload's status shows inside its panel."""
    return int(driver.execute_script("""
        const page = document.documentElement;
        let worst = page.scrollWidth - page.clientWidth;
        for (const list of document.querySelectorAll('#uploads, #documents'))
            worst = Math.max(worst, list.scrollWidth - list.clientWidth);
        const panel = document.getElementById('upload-panel').getBoundingClientRect();
        for (const s of document.querySelectorAll('.upload-state'))
            worst = Math.max(worst, Math.ceil(s.getBoundingClientRect().right - panel.right));
        return worst;"""))


def test_page_lists_opens_deletes_documents_and_holds_its_shape(tmp_path: Path,
                                                                browser: Any) -> None:
    """Long file names and a failure in the upload list: the page stays as wide as the
    window at 1280 and 390 px; the documents list shows what is stored, opens a document
    and deletes one; a notebook shows its own contents."""
    files = tmp_path / "files"
    files.mkdir()
    long = "quarterly-report-of-the-regional-wading-bird-survey-with-appendices-" * 2
    names = [f"{long}herons.md", f"{long}egrets.txt", f"{long}broken-on-purpose.pdf"]
    (files / names[0]).write_text(HERONS)
    (files / names[1]).write_text(EGRETS)
    (files / names[2]).write_bytes(b"%PDF-1.7 not really a PDF")
    with served(tmp_path, "--db", str(tmp_path / "db")) as (proc, url):
        wait_ready_process(proc, url)
        d = browser
        d.set_window_size(1280, 900)
        d.get(url + "/")
        until(d, lambda d: "Nothing stored yet." in d.find_element(By.ID, "documents").text)
        d.find_element(By.ID, "file-input").send_keys("\n".join(str(files / n) for n in names))
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".upload[data-status]")) == 3)
        assert d.find_element(By.CSS_SELECTOR, ".upload.failed .upload-reason").text
        rows = until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#documents li[data-id]")
                     if len(d.find_elements(By.CSS_SELECTOR, "#documents li[data-id]")) == 2
                     else None)
        assert _overflow(d) == 0, "wider than the window at 1280 px"
        shot(d, "page-uploads-1280.png")

        # open a document from the list: its whole text, no search needed
        herons = next(r for r in rows if "Herons of the marsh" in r.text or "herons.md" in
                      (r.find_element(By.CSS_SELECTOR, ".doc").get_attribute("title") or ""))
        herons.find_element(By.CSS_SELECTOR, ".doc").click()
        until(d, lambda d: "grey heron stands motionless" in
              d.find_element(By.ID, "viewer-body").text)
        d.find_element(By.ID, "viewer-body").send_keys(Keys.ESCAPE)
        until(d, lambda d: not d.find_element(By.ID, "viewer").get_attribute("open"))

        # a phone-sized window, the upload list as it is: still no horizontal scrollbar
        d.set_window_size(390, 844)
        until(d, lambda d: _overflow(d) == 0)
        shot(d, "page-uploads-390.png")
        d.set_window_size(1280, 900)

        # delete one from the list: it leaves the store and the list
        d.execute_script("window.confirm = () => true;")
        herons = next(r for r in d.find_elements(By.CSS_SELECTOR, "#documents li[data-id]")
                      if "herons.md" in (r.find_element(By.CSS_SELECTOR, ".doc")
                                         .get_attribute("title") or ""))
        herons.find_element(By.CSS_SELECTOR, ".delete").click()
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#documents li[data-id]")) == 1
              and stat(d, "Documents") == "1")
        assert "egrets.txt" in d.find_element(By.CSS_SELECTOR, "#documents .doc") \
            .get_attribute("title")

        # a notebook's contents: a new one is empty; the whole store is back when it is left
        d.find_element(By.ID, "new-notebook").click()
        d.find_element(By.ID, "notebook-name").send_keys("Waders", Keys.ENTER)
        until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#notebooks .nb"))
        d.find_element(By.CSS_SELECTOR, "#notebooks .nb").click()
        until(d, lambda d: "No documents in this notebook." in
              d.find_element(By.ID, "documents").text)
        assert d.find_element(By.ID, "documents-title").text == "In Waders"
        d.find_element(By.CSS_SELECTOR, "#notebooks .nb").click()
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#documents li[data-id]")) == 1)
        logs = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
        assert not logs, logs


def test_page_filters_and_more_results(tmp_path: Path, browser: Any) -> None:
    """The filters narrow a search as the API's options do (type, source, added since, one
    passage per document), and "More results" asks for more."""
    files = tmp_path / "files"
    files.mkdir()
    (files / "herons.md").write_text(HERONS)
    (files / "egrets.txt").write_text(EGRETS)
    # enough passages about waders for more than one page of hits
    (files / "waders.txt").write_text("\n\n".join(
        f"Wader note {n}: the waders fed on the mudflat at low tide, probing for worms and "
        f"small shellfish, and rose together when a falcon passed over the estuary. " * 5
        for n in range(40)))
    with served(tmp_path, "--db", str(tmp_path / "db")) as (proc, url):
        wait_ready_process(proc, url)
        d = browser
        d.set_window_size(1280, 900)
        d.get(url + "/?mode=text")
        until(d, lambda d: "Nothing stored yet." in d.find_element(By.ID, "documents").text)
        d.find_element(By.ID, "file-input").send_keys(
            "\n".join(str(files / n) for n in ("herons.md", "egrets.txt", "waders.txt")))
        until(d, lambda d: stat(d, "Documents") == "3")

        def sources() -> list[str]:
            return [h.find_element(By.CSS_SELECTOR, ".source").text
                    for h in d.find_elements(By.CSS_SELECTOR, ".hit")]

        def searched(action: Any) -> list[str]:
            d.execute_script("document.getElementById('summary').textContent = '';")
            action()
            until(d, lambda d: d.find_element(By.ID, "summary").text not in ("", "Searching…"))
            return sources()

        box = d.find_element(By.ID, "q")
        box.send_keys("herons egrets water", Keys.ENTER)
        until(d, lambda d: "· text ·" in d.find_element(By.ID, "summary").text)
        everything = sources()
        assert {"upload://herons.md", "upload://egrets.txt"} <= set(everything)

        d.find_element(By.CSS_SELECTOR, "#filters summary").click()
        until(d, lambda d: "text/markdown" in [o.get_attribute("value") for o in
                                               d.find_elements(By.CSS_SELECTOR, "#f-type option")])
        only_md = searched(lambda: d.execute_script(
            "const s = document.getElementById('f-type'); s.value = 'text/markdown';"
            " s.dispatchEvent(new Event('change'));"))
        assert only_md and set(only_md) == {"upload://herons.md"}
        d.execute_script("const s = document.getElementById('f-type'); s.value = '';")

        only_txt = searched(lambda: (d.find_element(By.ID, "f-source").send_keys(
            "*.txt", Keys.ENTER)))
        assert only_txt and set(only_txt) == {"upload://egrets.txt"}
        d.find_element(By.ID, "f-source").clear()

        later = searched(lambda: d.execute_script(
            "const s = document.getElementById('f-after'); s.value = '2999-01-01';"
            " s.dispatchEvent(new Event('change'));"))
        assert later == []
        d.execute_script("document.getElementById('f-after').value = '';")

        per_doc = searched(lambda: d.find_element(By.ID, "f-per-doc").click())
        assert len(per_doc) == len(set(per_doc)) >= 2

        # without the toggle, a word of many passages: a page of 20, then More asks for more
        d.find_element(By.ID, "f-per-doc").click()
        d.find_element(By.ID, "q").clear()
        first = searched(lambda: d.find_element(By.ID, "q").send_keys("mudflat", Keys.ENTER))
        assert len(first) == 20 and d.find_element(By.ID, "more-results").is_displayed()
        d.find_element(By.ID, "more-results").click()
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".hit")) > 20)
        assert _overflow(d) == 0
        logs = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
        assert not logs, logs


def test_page_asks_and_opens_a_citation(tmp_path: Path, browser: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ask mode (shown when the server has a chat model) streams an answer from a
    loopback chat server; its citation opens the passage viewer at the cited span."""
    from chat_server import chat_server

    files = tmp_path / "files"
    files.mkdir()
    (files / "herons.md").write_text(HERONS)
    (files / "egrets.txt").write_text(EGRETS)
    with chat_server() as model:
        model.reply = "Little egrets have bright yellow feet [1], and herons strike fish [9]."
        monkeypatch.setenv("SURREALDOCS_LLM", "openai:tiny")
        monkeypatch.setenv("SURREALDOCS_LLM_BASE_URL", model.url + "/v1")
        with served(tmp_path, "--db", str(tmp_path / "db")) as (proc, url):
            wait_ready_process(proc, url)
            d = browser
            d.set_window_size(1280, 900)
            d.get(url + "/")
            until(d, lambda d: d.find_element(By.CSS_SELECTOR, '.modes [data-mode="ask"]')
                  .is_displayed())
            d.find_element(By.ID, "file-input").send_keys(
                "\n".join(str(files / n) for n in ("herons.md", "egrets.txt")))
            until(d, lambda d: stat(d, "Documents") == "2")
            # the words of a search in the box: choosing Ask sends nothing to the model
            d.find_element(By.CSS_SELECTOR, '.modes [data-mode="text"]').click()
            d.find_element(By.ID, "q").send_keys("egret", Keys.ENTER)
            until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#results li .snippet"))
            d.find_element(By.CSS_SELECTOR, '.modes [data-mode="ask"]').click()
            until(d, lambda d: "press Enter" in d.find_element(By.ID, "summary").text)
            assert not model.requests
            assert d.find_element(By.ID, "q").get_attribute("placeholder") \
                == "Ask a question about your documents"
            d.find_element(By.ID, "q").send_keys("What colour are the little egret's feet?",
                                                 Keys.ENTER)
            until(d, lambda d: "tiny" in d.find_element(By.ID, "summary").text)
            answer = d.find_element(By.ID, "answer-text").text
            assert answer.startswith("Little egrets have bright yellow feet [1]")
            assert "[9]" not in answer  # an invented citation is removed
            assert "removed" in d.find_element(By.ID, "answer").text
            assert model.requests and "bright yellow feet" in model.prompt()
            assert _overflow(d) == 0
            shot(d, "page-ask-1280.png")

            d.find_element(By.CSS_SELECTOR, "#answer-text .cite").click()
            chunk = until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#viewer[open] .chunk"))[0]
            assert chunk.text.strip()
            assert "egrets.txt" in d.find_element(By.ID, "viewer-meta").text \
                or "herons.md" in d.find_element(By.ID, "viewer-meta").text
            d.find_element(By.ID, "viewer-body").send_keys(Keys.ESCAPE)
            until(d, lambda d: not d.find_element(By.ID, "viewer").get_attribute("open"))

            # a follow-up in the same conversation, said to be one: rewritten with the turn
            # before it
            until(d, lambda d: d.find_element(By.ID, "follow-up").is_displayed())
            assert "follow-up" in d.find_element(By.ID, "q").get_attribute("placeholder")
            model.script = ["What colour are a little egret's legs?", "Black legs [1]."]
            box = d.find_element(By.ID, "q")
            box.clear()
            box.send_keys("And its legs?", Keys.ENTER)
            until(d, lambda d: d.find_element(By.ID, "answer-text").text == "Black legs [1].")
            assert "Follow-up: And its legs?" in str(model.requests[-2]["messages"])
            assert "What colour are the little egret's feet?" in \
                d.find_element(By.ID, "turns").text

            d.set_window_size(390, 844)
            until(d, lambda d: _overflow(d) == 0)
            shot(d, "page-ask-390.png")
            d.find_element(By.ID, "new-conversation").click()
            until(d, lambda d: not d.find_element(By.ID, "conversation").is_displayed())

            # the conversation is listed; opened, its turns show; deleted, it is gone
            d.set_window_size(1280, 900)
            # the list is loaded again once the answer (and so the turn) is complete
            chats = until(d, lambda d: [li for li in d.find_elements(
                By.CSS_SELECTOR, "#chats li[data-id]")
                if "2 questions" in (li.get_attribute("textContent") or "")])
            chats[0].find_element(By.CSS_SELECTOR, ".doc").click()
            until(d, lambda d: "And its legs?" in d.find_element(By.ID, "turns").text)
            d.execute_script("window.confirm = () => true;")
            d.find_element(By.CSS_SELECTOR, "#chats li[data-id] .delete").click()
            until(d, lambda d: not d.find_elements(By.CSS_SELECTOR, "#chats li[data-id]"))
            logs = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
            assert not logs, logs


def test_page_adds_a_web_page_and_filters_on_metadata(tmp_path: Path, browser: Any) -> None:
    """Issue 42: the URL field adds a page (fetched by a job on the server, here allowed
    to reach loopback), and the metadata filter of the filter row narrows a search."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    article = (b"<html><head><title>Storks</title><meta property='og:site_name'"
               b" content='Bird Notes'></head><body><nav>Home | Shop</nav><main><article>"
               b"<h1>Storks</h1><p>White storks build huge nests of sticks on roofs, chimneys"
               b" and church towers, and come back to the same nest every spring.</p><p>They"
               b" clatter their bills loudly to greet their mates at the nest.</p></article>"
               b"</main><footer>Copyright</footer></body></html>")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            found = self.path == "/storks"
            body = article if found else b"no"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    site = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    page_url = f"http://127.0.0.1:{site.server_address[1]}/storks"
    files = tmp_path / "files"
    files.mkdir()
    (files / "herons.md").write_text(HERONS)
    db = str(tmp_path / "db")
    try:
        with served(tmp_path, "--db", db, "--allow-private-urls") as (proc, url):
            wait_ready_process(proc, url)
            d = browser
            d.get(url + "/")
            until(d, lambda d: "Documents" in d.find_element(By.ID, "stats").text)
            d.find_element(By.ID, "file-input").send_keys(str(files / "herons.md"))
            d.find_element(By.ID, "url-input").send_keys(page_url)
            d.find_element(By.CSS_SELECTOR, "#url-form button").click()
            until(d, lambda d: len(d.find_elements(
                By.CSS_SELECTOR, '.upload[data-status="ingested"]')) == 2)
            row = d.find_element(By.CSS_SELECTOR, f'.upload[data-name="{page_url}"]')
            assert row.get_attribute("data-status") == "ingested"
            # the filter row's metadata filter: only the page's site
            d.find_element(By.CSS_SELECTOR, "#filters summary").click()
            d.find_element(By.ID, "f-where").send_keys("site_name=Bird Notes")
            box = d.find_element(By.ID, "q")
            box.send_keys("nests birds")
            box.send_keys(Keys.ENTER)
            until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit"))
            sources = texts(d, "#results .hit .source")
            assert sources and set(sources) == {page_url}, sources
    finally:
        site.shutdown()
        site.server_close()


def test_page_reranks_with_the_servers_reranker(tmp_path: Path, browser: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44: a server with a reranker shows a Rerank toggle; on, the reranker's best
    passage leads and the summary says "reranked"; off, the first stage's order."""
    from test_rerank import KINGFISHER, TEXTS, rerank_server

    with rerank_server() as reranker:
        monkeypatch.setenv("SURREALDOCS_RERANK", "rerank:tiny")
        monkeypatch.setenv("SURREALDOCS_RERANK_BASE_URL", reranker.url)
        monkeypatch.setenv("SURREALDOCS_RELEVANCE_CUTOFF", "0")  # every heron passage
        db = str(tmp_path / "db")
        with served(tmp_path, "--db", db) as (proc, url):
            wait_ready_process(proc, url)
            import httpx

            assert httpx.post(url + "/v1/texts", json={"texts": [
                {"source": s, "text": t} for s, t in TEXTS.items()]},
                timeout=60).status_code == 200
            d = browser
            d.get(url + "/")
            until(d, lambda d: "Documents" in d.find_element(By.ID, "stats").text)
            d.find_element(By.CSS_SELECTOR, "#filters summary").click()
            toggle = d.find_element(By.ID, "f-rerank")
            until(d, lambda d: d.find_element(By.ID, "f-rerank-label").is_displayed())
            assert toggle.is_selected()
            d.find_element(By.CSS_SELECTOR, '.modes [data-mode="text"]').click()
            box = d.find_element(By.ID, "q")
            box.send_keys("heron")
            box.send_keys(Keys.ENTER)
            until(d, lambda d: "reranked" in d.find_element(By.ID, "summary").text)
            assert texts(d, "#results .hit .source")[0] == KINGFISHER
            toggle.click()  # off: searched again in the first stage's order
            until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit")
                  and "reranked" not in d.find_element(By.ID, "summary").text)
            assert texts(d, "#results .hit .source")[0] != KINGFISHER
