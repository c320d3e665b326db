"""Kafka for PySpark with nothing beyond ``pip install``: the ``kafkapy`` data source.

``register(spark)`` makes ``format("kafkapy")`` available to ``spark.read``, ``readStream``,
``write`` and ``writeStream``, with the option names and columns of Spark's built-in ``kafka``
format (which needs the spark-sql-kafka jar from Maven). It works against any Kafka broker.
Needs ``pip install 'kafkapy[spark]'`` (PySpark 4.2+, PyArrow).

    from kafkapy.spark import register
    register(spark)
    df = (spark.read.format("kafkapy")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").load())
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``kafkapy`` format with ``spark`` (a SparkSession).

    Also lets ``df.write.format("kafkapy").save()`` run in Spark's default save mode, as
    ``format("kafka")`` does (see :mod:`kafkapy.spark.save_mode`).
    """
    from kafkapy.spark.save_mode import install
    from kafkapy.spark.source import KafkapyDataSource

    spark.dataSource.register(KafkapyDataSource)
    install()
