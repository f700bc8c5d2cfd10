"""Web pages as sources: URLs normalised (:mod:`.urls`), a polite and safe fetcher
(:mod:`.fetcher`, with the address policy of :mod:`.guard` and robots.txt), sitemaps and a
bounded crawl (:mod:`.crawl`), and a page's main content (:mod:`.content`)."""
