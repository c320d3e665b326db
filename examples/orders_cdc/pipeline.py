"""CQRS over a CDC stream: per-customer order totals, kept as a compacted Kafka topic and Parquet.

The command side is the ``orders`` change stream (see ``orders.py``). This Structured Streaming
job folds it into the query side: for every customer, the number of live orders, their total
amount and how many changes touched them. Each micro-batch's updated rows go

* to the compacted topic ``customer-view``, keyed by customer, so the topic always holds each
  customer's latest totals (a reader rebuilds the whole view from it), and
* to Parquet under ``<out>/batch_id=<n>/``, the history of every update.

Spark keeps the source offsets and the aggregation state in the checkpoint, so a query stopped
at any point (even killed) resumes where it was, counting every change exactly once; a replayed
micro-batch rewrites its own Parquet directory and republishes the same latest totals, so both
outputs stay exact.

    python pipeline.py --bootstrap 127.0.0.1:9092 --checkpoint /tmp/ckpt --out /tmp/view \\
        [--trigger available-now | --trigger 2s]

It reads and writes Kafka with the ``kafkapy`` PySpark data source (``pip install
'kafkapy[spark]'``) or, with ``--connector kafka``, with Spark's built-in connector, which it
loads from Maven with ``spark.jars.packages`` (as ``--packages`` does):

    python pipeline.py --connector kafka --bootstrap 127.0.0.1:9092 --checkpoint /tmp/ckpt --out /tmp/view
"""

from __future__ import annotations

import argparse

import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from kafkapy.spark import register

ORDER = StructType([
    StructField("order_id", StringType()),
    StructField("customer", StringType()),
    StructField("amount_cents", LongType()),
])
CHANGE = StructType([
    StructField("seq", LongType()),
    StructField("op", StringType()),
    StructField("order_id", StringType()),
    StructField("before", ORDER),
    StructField("after", ORDER),
])


def customer_totals(changes: DataFrame) -> DataFrame:
    """Fold order changes into per-customer totals: the before image counts negative, the after
    image positive, so inserts, updates, deletes and moves between customers all add up."""
    parsed = changes.select(F.from_json(F.col("value").cast("string"), CHANGE).alias("c"))
    contributions = parsed.select(F.explode(F.array(
        F.struct(F.col("c.before.customer").alias("customer"),
                 (-F.col("c.before.amount_cents")).alias("amount_cents"),
                 F.lit(-1).alias("orders")),
        F.struct(F.col("c.after.customer").alias("customer"),
                 F.col("c.after.amount_cents").alias("amount_cents"),
                 F.lit(1).alias("orders")),
    )).alias("x")).where(F.col("x.customer").isNotNull()).select("x.*")
    return contributions.groupBy("customer").agg(
        F.sum("orders").alias("orders"),
        F.sum("amount_cents").alias("amount_cents"),
        F.count(F.lit(1)).alias("changes"),
    )


def publish(bootstrap: str, view_topic: str, out: str, connector: str = "kafkapy"):
    def write(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            (batch.select(F.col("customer").alias("key"),
                          F.to_json(F.struct("orders", "amount_cents", "changes")).alias("value"))
             .write.format(connector).mode("append")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", view_topic)
             .save())
            # One directory per micro-batch, overwritten on replay: the history stays exact.
            batch.write.mode("overwrite").parquet(f"{out}/batch_id={batch_id}")
        finally:
            batch.unpersist()
    return write


def create_topics(bootstrap: str, orders_topic: str, view_topic: str, partitions: int) -> None:
    """The change stream and the compacted view, unless they exist (kafka-python's admin)."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        for topic in (NewTopic(orders_topic, partitions, -1),
                      NewTopic(view_topic, 1, -1, topic_configs={"cleanup.policy": "compact"})):
            try:
                admin.create_topics([topic])
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--orders-topic", default="orders")
    parser.add_argument("--view-topic", default="customer-view")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--trigger", default="available-now",
                        help="available-now, or a processing-time interval such as 2s")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--connector", choices=("kafkapy", "kafka"), default="kafkapy",
                        help="kafkapy: the kafkapy data source; kafka: Spark's built-in connector, "
                             "loaded from Maven with spark.jars.packages")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra SparkSession settings (e.g. spark.jars.ivy)")
    parser.add_argument("--create-topics", action="store_true",
                        help="create the orders topic (3 partitions) and the compacted view topic")
    args = parser.parse_args()
    if args.create_topics:
        create_topics(args.bootstrap, args.orders_topic, args.view_topic, 3)

    builder = (SparkSession.builder.master(args.master).appName("orders-cdc-view")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.enabled", "false"))
    if args.connector == "kafka":
        # The connector's version must be Spark's own (Scala 2.13 builds for Spark 4).
        builder = builder.config("spark.jars.packages",
                                 f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}")
    for setting in args.spark_conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if args.connector == "kafkapy":
        register(spark)
    reader = (spark.readStream.format(args.connector)
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.orders_topic)
              .option("startingOffsets", "earliest"))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    writer = (customer_totals(reader.load()).writeStream
              .outputMode("update")
              .option("checkpointLocation", args.checkpoint)
              .foreachBatch(publish(args.bootstrap, args.view_topic, args.out, args.connector)))
    if args.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger.replace("s", " seconds"))
    query = writer.start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
