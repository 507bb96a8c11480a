"""The ATen schema table (dialects/aten_schema.py): every line parsed on
first use, as `parse_schema` parses it."""

from __future__ import annotations

import tilefx.dialects.aten_schema as aten_schema
from tilefx.dialects.aten_schema import ATEN_SCHEMAS, SCHEMAS, SchemaTable, parse_schema


def test_the_table_holds_every_line_as_parse_schema_parses_it():
    eager = {s.name: s for s in (parse_schema(line) for line in SCHEMAS.strip().splitlines())}
    assert list(ATEN_SCHEMAS) == list(eager) and len(ATEN_SCHEMAS) == len(eager)
    assert dict(ATEN_SCHEMAS.items()) == eager
    assert "relu.default" in ATEN_SCHEMAS and "relu" not in ATEN_SCHEMAS and ATEN_SCHEMAS.get("relu") is None


def test_looking_up_an_op_parses_its_line_only(monkeypatch):
    parsed = []

    def counting(line):
        parsed.append(line)
        return parse_schema(line)

    monkeypatch.setattr(aten_schema, "parse_schema", counting)
    table = SchemaTable(SCHEMAS)
    assert "add.Tensor" in table and len(table) == len(ATEN_SCHEMAS) and not parsed
    assert table["add.Tensor"] is table["add.Tensor"] == ATEN_SCHEMAS["add.Tensor"]
    assert parsed == ["add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"]
