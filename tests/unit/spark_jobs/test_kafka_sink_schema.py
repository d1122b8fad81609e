"""Which DataFrames the `minibroker` sink takes: the JVM connector's KafkaWriter.validateQuery, without a session."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.kafka_options import OptionError
from spark_jobs.kafka_writer import check_sink_schema


def struct(**columns: DataType) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


def headers(key: str = "key", value: str = "value") -> ArrayType:
    return ArrayType(struct(**{key: StringType(), value: BinaryType()}))


def test_the_connectors_columns_are_taken() -> None:
    check_sink_schema(struct(key=StringType(), value=BinaryType(), topic=StringType(), partition=IntegerType(),
                             headers=headers()), None)
    check_sink_schema(struct(value=StringType()), "out")


@pytest.mark.parametrize(("schema", "topic", "message"), [
    (struct(key=StringType()), "out", "Required attribute 'value' not found"),
    (struct(value=StringType()), None, "topic option required when no 'topic' attribute is present"),
    (struct(value=IntegerType()), "out", "value attribute type must be a string or a binary"),
    (struct(value=StringType(), partition=LongType()), "out", "partition attribute type must be a integer"),
    (struct(value=StringType(), topic=BinaryType()), None, "topic attribute type must be a string"),
    (struct(value=StringType(), headers=headers("k", "v")), "out", "headers attribute type must be"),
])
def test_a_column_of_the_wrong_type_or_none_to_write_is_refused(schema: StructType, topic: str | None,
                                                                message: str) -> None:
    with pytest.raises(OptionError, match=message):
        check_sink_schema(schema, topic)
