"""A table's data schema as Spark writes it: the Parquet field ids an Arrow schema carries (a table format's
ids of its columns, given by the format with the schema) as each StructField's ``parquet.field.id``, at
every nesting level, which Spark's Parquet writer writes as the file's field ids
(``spark.sql.parquet.fieldId.write.enabled``); and the field ids a file's schema has, to check them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from compactor.engines.footer_facts import FIELD_ID
from compactor.errors import VerificationError

#: the StructField metadata key Spark's Parquet writer reads a field id from
SPARK_FIELD_ID = "parquet.field.id"
#: a rewrite's session settings: field ids written from each StructField's ``parquet.field.id``, and never
#: used to read (files written before a table gave its columns ids carry none, and are read by name)
FIELD_ID_CONF = {"spark.sql.parquet.fieldId.write.enabled": "true", "spark.sql.parquet.fieldId.read.enabled": "false"}


def field_ids(schema: pa.Schema) -> dict[str, int]:
    """Each field's Parquet field id by its path (nested fields too: a list's element is ``[]``, a map's key
    and value ``{key}`` and ``{value}``, whatever a writer names them); empty where none has one."""
    out: dict[str, int] = {}

    def walk(fields: list[tuple[str, pa.Field]], at: str) -> None:
        for part, f in fields:
            raw = (f.metadata or {}).get(FIELD_ID)
            if raw is not None:
                out[at + part] = int(raw)
            walk(_children(f.type), f"{at}{part}.")

    walk([(f.name, f) for f in schema], "")
    return out


def _children(t: pa.DataType) -> list[tuple[str, pa.Field]]:
    """The fields nested in ``t``, each with its part of a path."""
    if pa.types.is_struct(t):
        return [(t.field(i).name, t.field(i)) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [("[]", t.value_field)]
    if pa.types.is_map(t):
        return [("{key}", t.key_field), ("{value}", t.item_field)]
    return []


def with_field_ids(arrow: pa.Schema, spark: Any) -> Any:
    """``spark`` (pyspark's StructType of ``arrow``, as ``from_arrow_schema`` makes it, which drops field
    metadata) with the field id of each of ``arrow``'s fields in its StructField's metadata; ``spark`` itself
    where ``arrow`` has none."""
    if not field_ids(arrow):
        return spark
    return _struct(list(arrow), spark)


def _struct(arrow: list[pa.Field], spark: Any) -> Any:
    from pyspark.sql.types import StructField, StructType

    fields = []
    for a, s in zip(arrow, spark.fields, strict=True):
        metadata = dict(s.metadata or {})
        raw = (a.metadata or {}).get(FIELD_ID)
        if raw is not None:
            metadata[SPARK_FIELD_ID] = int(raw)
        fields.append(StructField(s.name, _type(a.type, s.dataType), s.nullable, metadata))
    return StructType(fields)


def _type(arrow: pa.DataType, spark: Any) -> Any:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if pa.types.is_struct(arrow) and isinstance(spark, StructType):
        return _struct([arrow.field(i) for i in range(arrow.num_fields)], spark)
    if (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)) and isinstance(spark, ArrayType):
        return ArrayType(_type(arrow.value_type, spark.elementType), spark.containsNull)
    if pa.types.is_map(arrow) and isinstance(spark, MapType):
        return MapType(_type(arrow.key_type, spark.keyType), _type(arrow.item_type, spark.valueType),
                       spark.valueContainsNull)
    return spark


def check_field_ids(written: pa.Schema, expected: pa.Schema, location: str) -> None:
    """The file Spark wrote at ``location`` carries exactly the field ids of the table's schema."""
    if field_ids(written) != field_ids(expected):
        raise VerificationError(f"{location}: Spark wrote the Parquet field ids {field_ids(written)}, the table's "
                                f"columns have {field_ids(expected)}; nothing was committed")
