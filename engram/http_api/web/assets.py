"""The web page's templates and static files: package data read through importlib.resources.

Templates are Jinja2 with autoescape on for every template (memory text is hostile); the
static files are a closed list, each with its content type, so no path from a request ever
reaches the file system. Both live inside this package and ship in the wheel.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import jinja2

PACKAGE: Final = "engram.http_api.web"
TEMPLATES: Final = "templates"
STATIC: Final = "static"
STATIC_TYPES: Final = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


@functools.cache
def environment() -> jinja2.Environment:
    """Return the template environment: this package's templates, everything autoescaped."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader(PACKAGE, TEMPLATES),
        autoescape=True,  # every template, whatever its name
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, **context: Any) -> str:
    """Return the page a template makes of ``context``."""
    return environment().get_template(name).render(**context)


@functools.cache
def static_file(name: str) -> tuple[bytes, str] | None:
    """Return a static file's bytes and content type, or None for a name not shipped."""
    kind = STATIC_TYPES.get(name)
    if kind is None:
        return None
    return resources.files(PACKAGE).joinpath(STATIC, name).read_bytes(), kind
