"""docs/spark.md's first-run example, run as written, and the sink behaviours it promises.

The example is taken from the doc itself (the ```python block of its "First run" section), so the
doc cannot drift from what runs: only the bootstrap address and the topic name are swapped for the
test node's and a fresh topic's. It runs as its own process with PYSPARK_PYTHON set as the doc
says, the way a user runs `python first_run.py`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafkapy.testing.node import KafkaNode

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
DOC_BOOTSTRAP = "127.0.0.1:9092"
DOC_TOPIC = '"orders"'


def first_run_block() -> str:
    text = DOC.read_text()
    section = text.split("## First run", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "docs/spark.md's First run section should hold one python block"
    return blocks[0]


def test_the_docs_first_run_writes_to_a_new_topic_and_reads_it_back(node, kafka, tmp_path) -> None:
    code = first_run_block()
    # The doc's write has no .mode(...): the default save mode must work, as with format("kafka").
    assert ".mode(" not in code and ".save()" in code and code.count(DOC_BOOTSTRAP) == 2
    topic = f"first-run-{os.getpid()}"
    assert topic not in kafka.admin.list_topics()  # the write has to create it
    script = tmp_path / "first_run.py"
    script.write_text(code.replace(DOC_BOOTSTRAP, node.bootstrap).replace(DOC_TOPIC, f'"{topic}"'))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # show() printed the three records the example wrote.
    assert re.search(r'\|1\s*\|\{"id":1,"customer":"alice","amount":30\.0\}', proc.stdout), proc.stdout
    got = kafka.consume(topic, 3)  # auto-created with the node's num.partitions (3)
    assert sorted(r.key for r in got) == [b"1", b"2", b"3"]


def test_overwrite_is_refused_and_append_still_works(spark, node, kafka) -> None:
    topic = kafka.topic("modes", partitions=1)
    df = spark.createDataFrame([("a",)], "value string")
    write = lambda: df.write.format("kafkapy").option(  # noqa: E731
        "kafka.bootstrap.servers", node.bootstrap).option("topic", topic)
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        write().mode("overwrite").save()
    write().mode("append").save()
    write().mode("error").save()
    write().save(mode="errorifexists")
    assert [r.value for r in kafka.consume(topic, 1)] == [b"a"] * 3


def test_a_missing_topic_on_a_broker_without_auto_creation_fails_clearly(spark, tmp_path) -> None:
    with KafkaNode(tmp_path / "no-auto", overrides={"auto.create.topics.enable": "false"}) as n:
        df = spark.createDataFrame([("a",)], "value string")
        with pytest.raises(Exception, match="not present in metadata after 1500 ms"):
            (df.write.format("kafkapy").option("kafka.bootstrap.servers", n.bootstrap)
             .option("kafka.max.block.ms", "1500").option("topic", "absent").save())
