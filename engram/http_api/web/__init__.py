"""The web page of ``engram serve``: a small server-rendered UI at ``/`` over the same facade.

People review what their agents remember here: the dashboard (counts, hotspots, pitfall
candidates to confirm or reject, recent sessions), search with recall's filters, one memory
(its why chain, related memories, timeline, versions in git, staleness, and the TUI's actions
as POST forms) and the session a memory belongs to. The package:

    assets.py     the Jinja2 templates and static files shipped inside this package (no CDN,
                  no build step), read through importlib.resources; every template autoescapes
    views.py      what each page shows, read through the facade (no ranking, no storage here)
    pages.py      the routes: pages under ``/`` and ``/ui/``, forms, the CSRF key, headers
    templates/    the pages' HTML;  static/  one stylesheet and one small vanilla script

Reading works without JavaScript: search is a plain GET form, the script only fetches the
results as you type. Memory text is untrusted: it is escaped everywhere and shown as text,
never as HTML, and the pages forbid inline scripts (Content-Security-Policy). Every form
carries the server's CSRF key besides the guard's Origin and Sec-Fetch-Site checks.

This is part of the HTTP adapter: it imports the facade and what lies below it, never another
adapter. fastapi and jinja2 are imported by ``pages`` and ``assets``, not by this module.
"""
