"""The wire models of both faces (pydantic), one module per resource.

Unlike the rest of the package, these modules do not postpone their annotations (no
`from __future__ import annotations`): pydantic reads a model's annotations when it creates the
class, and a postponed one is a string it compiles and evaluates, field by field, in every
function's init (about 50 M instructions of an init)."""
