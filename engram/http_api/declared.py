"""HTTP inputs derived from the operations' declarations: body models and query-parameter sets.

``declared_model`` turns a tuple of ``engram.operations`` ``Param`` into a pydantic model: each
parameter a field of its declared type, default and limits, its help the field's description;
in a query the field is named by the parameter's ``wire`` name (``tag`` for ``tags``), in a body
by its ``name``. ``Declared.arguments`` gives the values back by service keyword (``target``),
a list's items split at commas as every adapter splits them (``?tags=a,b``, a body's
``"tags": "a, b"``), so a route passes them on without naming them: a parameter added to a
declaration reaches the facade, the request's validation and the OpenAPI document with no edit
of a route.

``query(model)`` and ``body(model)`` make the dependency a route takes such a model through;
``http_params`` reads an operation's parameters as HTTP offers them, where HTTP keeps limits of
its own (a page of 200, say).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar

from fastapi import Body, Depends, Query
from pydantic import BaseModel, ConfigDict, Field, create_model

from engram.http_api.defaults import MAX_BODY_BYTES
from engram.operations import OPERATIONS
from engram.operations.params import Param, split
from engram.operations.spec import Operation

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
OPERATION_KEY: Final = "x-engram-operation"

ITEM_CHARS: Final = 500  # a tag, a path, a kind, a name
QUERY_CHARS: Final = 2000  # one value of the query string
TITLE_CHARS: Final = 2000

Item = Annotated[str, Field(max_length=ITEM_CHARS)]
Text = Annotated[str, Field(max_length=MAX_BODY_BYTES)]
Title = Annotated[str, Field(min_length=1, max_length=TITLE_CHARS)]
QueryText = Annotated[str, Field(max_length=QUERY_CHARS)]


class Declared(BaseModel):
    """Values of declared parameters (a request body, or a route's query parameters)."""

    declared: ClassVar[tuple[Param, ...]] = ()

    def arguments(self) -> dict[str, Any]:
        """Return the values given, by service keyword (absent and null ones left out)."""
        out: dict[str, Any] = {}
        for param in self.declared:
            value = getattr(self, param.name)
            if value is None:
                continue
            if param.clamp and param.maximum is not None and value > param.maximum:
                value = type(value)(param.maximum)
            out[param.key] = _items(param, _plain(value))
        return out


class OpenDeclared(Declared):
    """Declared values and any other fields (kept on a memory as they are)."""

    model_config = ConfigDict(extra="allow")

    def extras(self) -> dict[str, Any]:
        """Return the fields given beyond the declared ones."""
        return dict(self.model_extra or {})


def _items(param: Param, value: Any) -> Any:
    """Return a list parameter's items as every adapter reads them (``params.split``)."""
    if param.type != "strings":
        return value
    if isinstance(value, str):
        return split(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return split(value)
    return value  # a list of link objects, say: the service reads them


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def http_params(
    operation: Operation,
    *,
    drop: Iterable[str] = (),
    add: Iterable[Param] = (),
    **changes: Mapping[str, Any],
) -> tuple[Param, ...]:
    """Return the parameters HTTP offers for ``operation``: less ``drop``, ``changes`` applied.

    ``changes`` maps a parameter's name to the fields HTTP declares otherwise (its own limits,
    a body field's name); ``add`` are HTTP's own parameters, after the declared ones.
    """
    dropped = set(drop)
    unknown = (dropped | set(changes)) - {p.name for p in operation.params}
    if unknown:
        raise ValueError(f"{operation.name} has no parameters {sorted(unknown)}")
    kept = [p for p in operation.params_for("http") if p.name not in dropped]
    return (*(p._replace(**changes.get(p.name, {})) for p in kept), *add)


def value_type(param: Param, where: str, strings: Mapping[str, Any]) -> Any:
    """Return the Python type of a parameter's value in a body or a query."""
    kind = param.type
    if kind in ("string", "csv", "date", "id"):
        if param.enum and not param.accept:
            return Literal[param.enum]  # aliases are for the service to resolve
        default = QueryText if where == "query" else Item
        return strings.get(param.name, default)
    if kind == "strings":
        # The service normalises the items (kind aliases, case); ``arguments`` splits them. A
        # query repeats the parameter or separates at commas; a body also takes one string.
        return list[Item] if where == "query" else list[Item] | Item
    if kind in ("integer", "number"):
        bounds = Field(
            ge=param.minimum, le=None if param.clamp else param.maximum, allow_inf_nan=False
        )
        number: type = int if kind == "integer" else float
        return Annotated[number, bounds]
    return {
        "boolean": bool,
        "object": dict[str, Any],
        "objects": list[dict[str, Any]],
        "array": list[Any],
    }[kind]


def declared_model(
    name: str,
    params: Iterable[Param],
    *,
    where: str = "body",
    optional: bool = False,
    strings: Mapping[str, Any] | None = None,
    types: Mapping[str, Any] | None = None,
    base: type[Declared] = Declared,
    doc: str = "",
) -> type[Declared]:
    """Return the model of ``params`` in a body or a query (``optional``: every field may go).

    ``strings`` bounds string fields by name (default: an item, or a query value); ``types``
    gives a field another type than its declaration's (a link as an object, say).
    """
    params = tuple(params)
    fields: dict[str, Any] = {}
    for param in params:
        kind = (types or {}).get(param.name) or value_type(param, where, strings or {})
        alias = param.wire if where == "query" else None
        if param.required and not optional:
            fields[param.name] = (kind, Field(..., alias=alias, description=param.help))
            continue
        default = None if optional else param.default
        kind = kind if default is not None else kind | None
        fields[param.name] = (kind, Field(default, alias=alias, description=param.help))
    model: type[Declared] = create_model(name, __base__=base, __doc__=doc or None, **fields)
    model.declared = params
    return model


def query(model: type[Declared]) -> Any:
    """Return the dependency that reads ``model`` from the query string."""
    return Depends(_given(model, Query()))


def body(model: type[Declared]) -> Any:
    """Return the dependency that reads ``model`` from the JSON body."""
    return Depends(_given(model, Body()))


def _given(model: type[Declared], source: Any) -> Callable[..., Declared]:
    def given(values: Declared) -> Declared:
        return values

    parameter = inspect.Parameter(
        "values", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Annotated[model, source]
    )
    given.__signature__ = inspect.Signature([parameter], return_annotation=model)  # type: ignore[attr-defined]
    given.__name__ = f"{model.__name__}_of_request"
    return given


def implements(name: str) -> Callable[[Endpoint], Endpoint]:
    """Mark a route's endpoint as the HTTP face of a declared operation (under ``@router.…``).

    ``document_routes`` then gives the route the operation's summary in OpenAPI, so the API's
    documentation, ``--help`` and the MCP tool table come from the same declaration.
    """
    operation = OPERATIONS[name]  # KeyError: no such operation is declared

    def mark(endpoint: Endpoint) -> Endpoint:
        endpoint.__dict__[OPERATION_KEY] = operation.name
        return endpoint

    return mark


def document_routes(routes: Iterable[Any]) -> None:
    """Give every route marked with ``implements`` its operation's summary and name."""
    for route in routes:
        endpoint = getattr(route, "endpoint", None)
        name = getattr(endpoint, "__dict__", {}).get(OPERATION_KEY)
        if name is None:
            continue
        route.summary = OPERATIONS[name].summary
        route.openapi_extra = {**(route.openapi_extra or {}), OPERATION_KEY: name}
