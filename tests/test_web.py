"""Web pages as sources, against a loopback HTTP server: pages and their main content,
redirects, 304s, changed and vanished pages, robots.txt, huge and slow bodies, compression
bombs, charsets, sitemaps and a bounded crawl; and the address policy a server applies
(loopback and private addresses refused, also behind a name and a redirect)."""

from __future__ import annotations

import gzip
import ipaddress
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import SAMPLES, StoreFactory
from surrealdocs.errors import ConfigurationError
from surrealdocs.web.crawl import links, sitemap_urls
from surrealdocs.web.fetcher import Fetcher, FetchError
from surrealdocs.web.guard import BlockedAddress, is_public, resolve
from surrealdocs.web.urls import normalise, within

ARTICLE = """<!doctype html><html><head><title>Herons of the marsh</title>
<meta name="author" content="Ana Lima"><link rel="canonical" href="{base}/birds/herons">
<meta property="og:site_name" content="Bird Notes"></head><body>
<header><nav><a href="/">Home</a> | <a href="/birds/">Birds</a> | <a href="/shop">Shop</a>
</nav><div class="cookie-banner">We use cookies to improve your experience. Accept all
cookies</div></header>
<main><article><h1>Herons of the marsh</h1>
<p>The grey heron stands motionless in shallow water for long minutes, then strikes at a
fish with its dagger bill. Herons nest in colonies called heronries, high in tall trees near
rivers and lakes, and return to the same colony year after year.</p>
<h2>Feeding</h2><p>Besides fish, herons take frogs, small mammals and young birds; in
winter they hunt along ditches and the edges of frozen ponds, where the ice is thin.</p>
<p>See also <a href="/birds/egrets">egrets</a> and <a href="/birds/storks">storks</a>.</p>
</article></main>
<footer>Copyright 2024 Bird Notes. All rights reserved. Privacy policy. Terms of use.
<a href="/about">About us</a></footer></body></html>"""

SIMPLE = ("<html><head><title>{title}</title></head><body><main><article><h1>{title}</h1>"
          "<p>{text}</p><p>{text}</p></article></main></body></html>")


@dataclass
class Site:
    """What the loopback server answers: path -> (status, headers, body) or a handler."""

    routes: dict[str, Any] = field(default_factory=dict)
    hits: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    base: str = ""

    def page(self, path: str, body: str | bytes, *, etag: str | None = None,
             content_type: str = "text/html; charset=utf-8") -> None:
        data = body.encode() if isinstance(body, str) else body
        headers = {"Content-Type": content_type}
        if etag:
            headers["ETag"] = etag
        self.routes[path] = (200, headers, data)


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            site.hits.append((self.path, dict(self.headers)))
            route = site.routes.get(self.path)
            if callable(route):
                route(self)
                return
            if route is None:
                route = (404, {"Content-Type": "text/plain"}, b"not here")
            status, headers, body = route
            etag = headers.get("ETag")
            if etag and self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def serving(site: Site) -> Iterator[Site]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    with serving(Site()) as s:
        yield s


# ----- URLs, addresses ----------------------------------------------------------------
def test_urls_are_named_one_way() -> None:
    assert normalise("HTTPS://Example.COM:443/a/%7euser/b?q=1#frag") == \
        "https://example.com/a/~user/b?q=1"
    assert normalise("http://example.com") == "http://example.com/"
    assert normalise("http://[::1]:8080/x") == "http://[::1]:8080/x"
    assert normalise("http://bücher.example/") == "http://xn--bcher-kva.example/"
    for bad in ("ftp://example.com/", "file:///etc/passwd", "http://", "javascript:alert(1)",
                "http://user:pw@example.com/", "http://example.com:99999/"):
        with pytest.raises(ConfigurationError):
            normalise(bad)
    assert within("https://a.com/docs/x/y", "https://a.com/docs/index.html")
    assert not within("https://a.com/blog/x", "https://a.com/docs/")
    assert not within("https://b.com/docs/x", "https://a.com/docs/")


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0",
    "100.64.0.1", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1",
    "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::",
    "192.0.2.1", "198.18.0.1"])
def test_private_and_reserved_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


def test_public_addresses_are_public() -> None:
    for address in ("93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"):
        assert is_public(ipaddress.ip_address(address)), address


async def test_a_name_that_resolves_to_loopback_is_refused() -> None:
    with pytest.raises(BlockedAddress, match=r"127\.0\.0\.1"):
        await resolve("localhost", 80, allow_private=False)
    assert await resolve("localhost", 80, allow_private=True)


# ----- the fetcher --------------------------------------------------------------------
async def test_a_server_refuses_private_addresses_also_behind_a_redirect(site: Site) -> None:
    site.page("/p", "<p>private</p>")
    async with Fetcher(allow_private=False) as guarded:
        for url in (site.base + "/p", site.base.replace("127.0.0.1", "localhost") + "/p",
                    "http://[::1]:1/p", "http://0x7f000001/p", "http://2130706433/p"):
            with pytest.raises((BlockedAddress, FetchError, ConfigurationError)):
                await guarded.fetch(url)
    assert not site.hits  # nothing reached the loopback server


async def test_redirects_are_followed_and_bounded(site: Site) -> None:
    site.page("/final", SIMPLE.format(title="Final", text="the end of the road " * 20))

    def redirect(to: str) -> Callable[[BaseHTTPRequestHandler], None]:
        def answer(h: BaseHTTPRequestHandler) -> None:
            h.send_response(302)
            h.send_header("Location", to)
            h.send_header("Content-Length", "0")
            h.end_headers()
        return answer

    site.routes["/a"] = redirect("/b")
    site.routes["/b"] = redirect(site.base + "/final")
    site.routes["/loop1"] = redirect("/loop2")
    site.routes["/loop2"] = redirect("/loop1")
    for n in range(8):
        site.routes[f"/chain{n}"] = redirect(f"/chain{n + 1}")
    site.routes["/out"] = redirect("file:///etc/passwd")
    async with Fetcher(obey_robots=False) as fetcher:
        page = await fetcher.fetch(site.base + "/a")
        assert page.url == site.base + "/final" and len(page.redirects) == 2
        for path, why in (("/loop1", "circle"), ("/chain0", "redirects"), ("/out", "http")):
            with pytest.raises(FetchError, match=why):
                await fetcher.fetch(site.base + path)


async def test_bodies_are_bounded_in_size_and_time(site: Site) -> None:
    site.page("/big", b"x" * 300_000, content_type="text/plain")
    bomb = gzip.compress(b"a" * 20_000_000)

    def gzipped(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(bomb)))
        h.end_headers()
        h.wfile.write(bomb)

    def slow(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", "1000")
        h.end_headers()
        try:
            for _ in range(1000):
                h.wfile.write(b"x")
                h.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    site.routes["/bomb"] = gzipped
    site.routes["/slow"] = slow
    async with Fetcher(obey_robots=False, max_bytes=100_000, deadline=1.0) as fetcher:
        with pytest.raises(FetchError, match="100,000"):
            await fetcher.fetch(site.base + "/big")
        with pytest.raises(FetchError, match="decompressed"):
            await fetcher.fetch(site.base + "/bomb")
        started = time.monotonic()
        with pytest.raises(FetchError, match="within 1 s"):
            await fetcher.fetch(site.base + "/slow")
        assert time.monotonic() - started < 30


async def test_robots_txt_is_obeyed(site: Site) -> None:
    site.routes["/robots.txt"] = (200, {"Content-Type": "text/plain"},
                                  b"User-agent: *\nDisallow: /private/\n")
    site.page("/private/x", "<p>secret</p>")
    site.page("/public", "<p>open</p>")
    async with Fetcher() as fetcher:
        assert (await fetcher.fetch(site.base + "/public")).status == 200
        with pytest.raises(FetchError, match=r"robots\.txt"):
            await fetcher.fetch(site.base + "/private/x")
    async with Fetcher(obey_robots=False) as fetcher:
        assert (await fetcher.fetch(site.base + "/private/x")).status == 200
    site.routes["/robots.txt"] = (503, {}, b"")
    async with Fetcher() as fetcher:  # a server error: nothing, for this run
        with pytest.raises(FetchError, match=r"robots\.txt"):
            await fetcher.fetch(site.base + "/public")
    user_agents = {h.get("User-Agent", "") for _, h in site.hits}
    assert all(a.startswith("surrealdocs/") for a in user_agents)


def test_links_and_sitemaps() -> None:
    page = ('<a href="/docs/a">a</a><a href="b#x">b</a><a href="/blog/c">c</a>'
            '<a href="https://other.com/docs/d">d</a><a rel="nofollow" href="/docs/e">e</a>'
            '<a href="mailto:x@y.z">m</a><a href="/docs/a">again</a>')
    assert links(page, "https://s.com/docs/index.html", "https://s.com/docs/") == [
        "https://s.com/docs/a", "https://s.com/docs/b"]
    xml = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           b"<url><loc>https://s.com/a?x=1&amp;y=2</loc></url><url><loc> https://s.com/b"
           b" </loc></url><url><loc>ftp://s.com/c</loc></url></urlset>")
    assert sitemap_urls(xml) == (["https://s.com/a?x=1&y=2", "https://s.com/b"], False)
    assert sitemap_urls(gzip.compress(xml))[0] == ["https://s.com/a?x=1&y=2",
                                                   "https://s.com/b"]
    index = b"<sitemapindex><sitemap><loc>https://s.com/s1.xml</loc></sitemap></sitemapindex>"
    assert sitemap_urls(index) == (["https://s.com/s1.xml"], True)
    with pytest.raises(ConfigurationError, match="decompressed"):
        sitemap_urls(gzip.compress(b"<urlset>" + b" " * 60_000_000))


# ----- ingest and refresh -------------------------------------------------------------
async def test_a_page_is_ingested_as_its_content_with_its_metadata(
        site: Site, open_kb: StoreFactory) -> None:
    kb = await open_kb()
    site.page("/birds/herons", ARTICLE.replace("{base}", "https://birds.example"),
              etag='"v1"')
    report = await kb.ingest_urls([site.base + "/birds/herons"], obey_robots=False,
                                  metadata={"team": "birds"})
    (result,) = report.results
    assert result.status == "ingested", result
    doc = await kb.document(site.base + "/birds/herons")
    text = doc.content or ""
    assert "motionless in shallow water" in text and "frozen ponds" in text
    for frame in ("cookies", "Privacy policy", "All rights reserved", "Shop"):
        assert frame not in text, frame
    assert doc.title == "Herons of the marsh"
    assert doc.metadata is not None
    assert doc.metadata["author"] == "Ana Lima" and doc.metadata["site_name"] == "Bird Notes"
    assert doc.metadata["canonical_url"] == "https://birds.example/birds/herons"
    assert doc.metadata["team"] == "birds"
    hits = await kb.search("heronries colony", mode="text", where="team=birds")
    assert hits and hits[0].source == site.base + "/birds/herons"
    # asked again: a 304, nothing read or extracted
    again = await kb.ingest_urls([site.base + "/birds/herons"], obey_robots=False)
    assert again.results[0].status == "unchanged"
    assert site.hits[-1][1].get("If-None-Match") == '"v1"'
    # changed: replaced
    site.page("/birds/herons", ARTICLE.replace("{base}", "https://birds.example").replace(
        "frozen ponds", "icy canals"), etag='"v2"')
    changed = await kb.ingest_urls([site.base + "/birds/herons"], obey_robots=False)
    assert changed.results[0].status == "updated"
    assert await kb.search("icy canals", mode="text")
    assert not await kb.search("frozen ponds", mode="text")


async def test_charsets_and_other_types(site: Site, open_kb: StoreFactory) -> None:
    kb = await open_kb()
    site.page("/latin", SIMPLE.format(title="Café crème", text="Un café crème à Paris, "
                                      "très bon et pas cher " * 4).encode("cp1252"),
              content_type="text/html; charset=windows-1252")
    site.page("/plain", "Grüße aus Köln und viele Störche ".encode("iso-8859-1") * 5,
              content_type="text/plain; charset=iso-8859-1")
    site.page("/report.pdf", (SAMPLES / "quarterly-report.pdf").read_bytes(),
              content_type="application/pdf")
    report = await kb.ingest_urls([site.base + "/latin", site.base + "/plain",
                                   site.base + "/report.pdf"], obey_robots=False)
    assert [r.status for r in report.results] == ["ingested"] * 3, report.results
    pdf = await kb.document(site.base + "/report.pdf", text=False)
    assert pdf.mime_type == "application/pdf" and pdf.chunk_count > 0
    assert "crème à Paris" in ((await kb.document(site.base + "/latin")).content or "")
    assert "Störche" in ((await kb.document(site.base + "/plain")).content or "")


async def test_a_crawl_stays_in_its_folder_and_within_its_bound(
        site: Site, open_kb: StoreFactory) -> None:
    kb = await open_kb()
    for n in range(6):
        nxt = f'<a href="/docs/p{n + 1}">next</a><a href="/blog/b{n}">blog</a>'
        site.page(f"/docs/p{n}", SIMPLE.format(title=f"Page {n}",
                                               text=f"chapter {n} of the guide " * 10)
                  .replace("</article>", nxt + "</article>"))
    report = await kb.ingest_urls([site.base + "/docs/p0"], follow=2, obey_robots=False)
    assert sorted(r.source for r in report.results) == [
        site.base + f"/docs/p{n}" for n in range(3)]
    report = await kb.ingest_urls([site.base + "/docs/p0"], follow=10, max_pages=4,
                                  obey_robots=False)
    assert len(report.results) == 4
    assert not any("/blog/" in path for path, _ in site.hits)


async def test_a_sitemap_lists_the_pages(site: Site, open_kb: StoreFactory) -> None:
    kb = await open_kb()
    for n in range(3):
        site.page(f"/s{n}", SIMPLE.format(title=f"Sitemap page {n}", text="listed " * 30))
    body = "".join(f"<url><loc>{site.base}/s{n}</loc></url>" for n in range(3))
    site.routes["/sitemap.xml"] = (200, {"Content-Type": "application/xml"},
                                   f"<urlset>{body}</urlset>".encode())
    report = await kb.ingest_urls(sitemaps=[site.base + "/sitemap.xml"], obey_robots=False)
    assert sorted(r.source for r in report.results) == [site.base + f"/s{n}"
                                                         for n in range(3)]
    assert all(r.status == "ingested" for r in report.results)


async def test_refresh_re_checks_and_reports_what_is_gone(
        site: Site, open_kb: StoreFactory) -> None:
    kb = await open_kb()
    for n in range(3):
        site.page(f"/r{n}", SIMPLE.format(title=f"R {n}", text=f"refresh page {n} " * 20),
                  etag=f'"r{n}"')
    await kb.ingest_urls([site.base + f"/r{n}" for n in range(3)], obey_robots=False)
    site.page("/r1", SIMPLE.format(title="R 1", text="a new text for page one " * 20),
              etag='"r1b"')
    del site.routes["/r2"]
    report = await kb.refresh(obey_robots=False)
    by = {r.source: r for r in report.results}
    assert by[site.base + "/r0"].status == "unchanged"
    assert by[site.base + "/r1"].status == "updated"
    assert by[site.base + "/r2"].status == "failed"
    assert (by[site.base + "/r2"].reason or "").startswith("gone")
    assert await kb.document(site.base + "/r2")  # kept until --prune
    assert not (await kb.refresh(older_than=3600, obey_robots=False)).results
    pruned = await kb.refresh(prune=True, obey_robots=False)
    assert {r.source: r.status for r in pruned.results}[site.base + "/r2"] == "deleted"
    assert [d.source for d in await kb.documents()] == [site.base + "/r0", site.base + "/r1"]


async def test_a_page_that_fails_is_named_and_the_rest_lands(
        site: Site, open_kb: StoreFactory) -> None:
    kb = await open_kb()
    site.page("/ok", SIMPLE.format(title="Fine", text="this one is fine " * 20))
    report = await kb.ingest_urls([site.base + "/ok", site.base + "/missing", "ftp://x/y",
                                   "http://127.0.0.1:1/closed"], obey_robots=False)
    by = {r.source: r for r in report.results}
    assert by[site.base + "/ok"].status == "ingested"
    assert by[site.base + "/missing"].status == "failed"
    assert "404" in (by[site.base + "/missing"].reason or "")
    assert by["ftp://x/y"].status == "failed"
    assert by["http://127.0.0.1:1/closed"].status == "failed"
    failures, _ = await kb.failures()
    assert site.base + "/missing" in {f.source for f in failures}


# ----- every face ---------------------------------------------------------------------
def test_the_command_line_ingests_and_refreshes_pages(site: Site, tmp_path: Any) -> None:
    import json

    from typer.testing import CliRunner

    from surrealdocs.faces.cli import app

    site.page("/a", SIMPLE.format(title="Page A", text="albatross glides over waves " * 10),
              etag='"a1"')
    site.page("/b", SIMPLE.format(title="Page B", text="bittern booms in reeds " * 10))
    notes = tmp_path / "note.md"
    notes.write_text("# Note\n\ncormorants dry their wings\n")
    listing = tmp_path / "urls.txt"
    listing.write_text(f"# pages\n{site.base}/b\n\n")
    store = ["--db", str(tmp_path / "kb"), "--model", "hashing-64"]
    run = CliRunner().invoke
    result = run(app, ["ingest", f"{site.base}/a", str(notes), "--urls", str(listing),
                       "--no-robots", "--meta", "kind=web", "--json", *store])
    assert result.exit_code == 0, result.output
    statuses = {r["source"]: r["status"] for r in json.loads(result.stdout)["results"]}
    assert statuses == {f"{site.base}/a": "ingested", f"{site.base}/b": "ingested",
                        str(notes): "ingested"}
    result = run(app, ["search", "albatross", "--mode", "text", "--where", "kind=web",
                       "--json", *store])
    assert [h["source"] for h in json.loads(result.stdout)] == [f"{site.base}/a"]
    result = run(app, ["refresh", "--no-robots", "--json", *store])
    assert result.exit_code == 0, result.output
    statuses = {r["source"]: r["status"] for r in json.loads(result.stdout)["results"]}
    assert statuses == {f"{site.base}/a": "unchanged", f"{site.base}/b": "unchanged"}
    for bad in (["refresh", "--older-than", "soon"], ["ingest"]):
        result = run(app, [*bad, *store])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output


def test_the_http_api_fetches_public_pages_only_unless_allowed(site: Site,
                                                                tmp_path: Any) -> None:
    from server_helpers import serve

    site.page("/p", SIMPLE.format(title="Intranet", text="internal wiki page " * 10))
    with serve(tmp_path) as server:
        r = server.client.post("/v1/urls", json={"urls": [site.base + "/p"]})
        assert r.status_code == 202, r.text
        job = server.wait_job(r.json()["job"]["id"])
        (result,) = job["result"]["results"]
        assert result["status"] == "failed" and "does not fetch" in result["reason"]
        bad = server.client.post("/v1/urls", json={"urls": ["file:///etc/passwd"]})
        assert bad.status_code == 422, bad.text
    assert not site.hits
    with serve(tmp_path / "intranet", allow_private_urls=True) as server:
        r = server.client.post("/v1/urls", json={"urls": [site.base + "/p"],
                                                 "metadata": {"team": "it"}})
        job = server.wait_job(r.json()["job"]["id"])
        assert job["result"]["results"][0]["status"] == "ingested", job
        found = server.client.post("/v1/search", json={"query": "internal wiki",
                                                       "mode": "text",
                                                       "where": {"team": "it"}})
        assert [h["source"] for h in found.json()["hits"]] == [site.base + "/p"]
        del site.routes["/p"]  # gone: the refresh job reports it, and prunes it when asked
        r = server.client.post("/v1/refresh", json={})
        assert r.status_code == 202, r.text
        job = server.wait_job(r.json()["job"]["id"])
        (result,) = job["result"]["results"]
        assert result["status"] == "failed" and result["reason"].startswith("gone"), job
        r = server.client.post("/v1/refresh", json={"prune": True})
        job = server.wait_job(r.json()["job"]["id"])
        assert job["result"]["results"][0]["status"] == "deleted", job
        assert server.client.get("/v1/stats").json()["documents"] == 0


async def test_the_mcp_add_url_tool_refuses_private_addresses(site: Site) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from surrealdocs import KnowledgeBase, Settings
    from surrealdocs.faces.mcp import build_mcp_server

    site.page("/m", SIMPLE.format(title="MCP page", text="moorhen on the pond " * 10))
    async with await KnowledgeBase.open(settings=Settings(db="mem://", model="hashing-64")) \
            as kb:
        async with Client(build_mcp_server(kb, allow_writes=True)) as client:
            result = await client.call_tool("add_url", {"url": site.base + "/m"})
            out = result.structured_content
            assert out is not None and out["results"][0]["status"] == "failed"
        assert not site.hits
        async with Client(build_mcp_server(kb, allow_writes=True,
                                           allow_private_urls=True)) as client:
            result = await client.call_tool("add_url", {"url": site.base + "/m"})
            out = result.structured_content
            assert out is not None and out["counts"]["ingested"] == 1, out


async def test_a_redirect_to_a_private_address_is_refused() -> None:
    import httpx

    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.url.host} {request.url.path} {request.headers.get('host')}")
        if request.url.path == "/robots.txt":
            return httpx.Response(404)
        return httpx.Response(302, headers={"Location": "http://127.0.0.1:9/admin"})

    async with Fetcher(allow_private=False, transport=httpx.MockTransport(answer)) as fetcher:
        with pytest.raises(BlockedAddress, match="does not fetch"):
            await fetcher.fetch("http://93.184.216.34/start")
    # the public address was asked (by its checked address, its name as Host); the
    # redirect's target never was
    assert asked == ["93.184.216.34 /robots.txt 93.184.216.34",
                     "93.184.216.34 /start 93.184.216.34"]


async def test_the_fetcher_connects_to_the_address_it_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A name is resolved once and checked; the request goes to that address, the name kept
    for the Host header and TLS (SNI and the certificate's check): a second resolution,
    which could answer otherwise, never happens."""
    import httpx

    import surrealdocs.web.fetcher as fetcher_module

    answers = iter([[ipaddress.ip_address("93.184.216.34")],
                    [ipaddress.ip_address("127.0.0.1")]])  # a rebinding name

    async def resolve_once(host: str, port: int, *, allow_private: bool) -> list[Any]:
        found = next(answers)
        if not allow_private and not all(is_public(a) for a in found):
            raise BlockedAddress(f"{host} resolves to {found[0]}")
        return found

    monkeypatch.setattr(fetcher_module, "resolve", resolve_once)
    seen: list[tuple[str, str | None, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.headers.get("host"),
                     request.extensions.get("sni_hostname")))
        return httpx.Response(200, headers={"Content-Type": "text/plain"}, content=b"ok")

    async with Fetcher(allow_private=False, obey_robots=False,
                       transport=httpx.MockTransport(answer)) as fetcher:
        page = await fetcher.fetch("https://rebind.example/page")
        assert page.data == b"ok"
        with pytest.raises(BlockedAddress):  # the next resolution: refused, never asked
            await fetcher.fetch("https://rebind.example/other")
    assert seen == [("93.184.216.34", "rebind.example", "rebind.example")]


async def test_at_most_two_requests_are_in_flight_per_host(site: Site) -> None:
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def slow_page(h: BaseHTTPRequestHandler) -> None:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.2)
        with lock:
            in_flight[0] -= 1
        body = b"a page"
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    for n in range(6):
        site.routes[f"/s{n}"] = slow_page
    async with Fetcher(obey_robots=False) as fetcher:
        import asyncio
        pages = await asyncio.gather(*(fetcher.fetch(f"{site.base}/s{n}") for n in range(6)))
    assert [p.data for p in pages] == [b"a page"] * 6
    assert 1 <= most[0] <= 2  # (2 unless the machine is too busy to overlap them)
