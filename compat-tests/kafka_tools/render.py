"""Write docs/compatibility.md's `kafka-cli-tools` block from the last CLI-tool run.

    .venv/bin/python -m pytest compat-tests/kafka_tools      # saves .tools/kafka-tools-runner/last-run.json
    .venv/bin/python compat-tests/kafka_tools/render.py       # rewrites the block

Each tool command is listed with its verdict: the same output as Apache Kafka (masked), an
allowed difference with its reason (allowlist.txt), or a difference nobody has explained.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from kafkapy.testing.doc_blocks import write_block  # noqa: E402

DEFAULT_RESULTS = REPO / ".tools" / "kafka-tools-runner" / "last-run.json"
BLOCK = "kafka-cli-tools"


def verdict(row: dict) -> str:
    if row["same"]:
        return "same"
    if row["allowed"]:
        return f"allowed difference ({row['allowed']})"
    return "differs"


def render(results: dict) -> str:
    from scenario import STEPS  # the commands as the scenario spells them now
    commands = {step.id: step.command for step in STEPS}
    rows = [{**row, "command": commands.get(row["id"], row["command"])} for row in results["rows"]]
    same = sum(r["same"] for r in rows)
    allowed = sum(bool(not r["same"] and r["allowed"]) for r in rows)
    differs = len(rows) - same - allowed
    lines = [
        "### Apache Kafka's CLI tools against kafkapy",
        "",
        "Each command ran against an Apache Kafka 4.4.0 node and a kafkapy node in the same scenario "
        "(compat-tests/kafka_tools, all calls in one JVM); outputs are compared line by line with ids, "
        "times, ports, paths, batch sizes and metadata-log offsets masked. Offline dumps "
        "(`kafka-dump-log`) of the data log are compared by batches, records, offsets, payloads and "
        "index entries, the metadata log and snapshot by record types and topics (their length depends "
        "on timing); the offline steps run after the broker stopped. Allowed differences are listed "
        "with their reason in compat-tests/kafka_tools/allowlist.txt.",
        "",
        f"{len(rows)} commands: {same} same, {allowed} allowed differences, {differs} differ. "
        f"Run time: Apache Kafka {results['seconds']['apache-kafka']} s, kafkapy "
        f"{results['seconds']['kafkapy']} s, {results['jvm_starts']} tool JVM start(s).",
        "",
        "| Command | Result |",
        "|---|---|",
    ]
    for row in rows:
        command = row["command"].replace("|", "\\|")
        lines.append(f"| `{command}` | {verdict(row).replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_RESULTS
    results = json.loads(path.read_text())
    write_block(REPO / "docs" / "compatibility.md", BLOCK, render(results))
    print(f"wrote block {BLOCK} of docs/compatibility.md from {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
