#!/usr/bin/env python3
"""kafkapy glue: pytest junit XML files (xunit1, which carries file=) -> results.tsv.

usage: junit_to_tsv.py <results.tsv> <collected-ids.txt> <junit.xml>...

One line per collected test: test_id<TAB>status<TAB>seconds<TAB>detail, status passed|failed|skipped.
A collected test with no junit entry (its pytest process hit the outer timeout or crashed) is
reported failed with that reason.
"""
import sys
import xml.etree.ElementTree as ET

RANK = {"passed": 0, "skipped": 1, "failed": 2}


def one_line(text, limit=400):
    text = " ".join((text or "").split())
    return text[:limit]


def node_id(tc):
    path = tc.get("file") or ""
    classname = tc.get("classname") or ""
    name = tc.get("name") or ""
    module = path[:-3].replace("/", ".") if path.endswith(".py") else ""
    parts = [path]
    if module and classname.startswith(module + "."):
        parts.extend(classname[len(module) + 1:].split("."))
    elif not path:
        parts = [classname.replace(".", "/") + ".py"]
    parts.append(name)
    return "::".join(parts)


def outcome(tc):
    for tag in ("failure", "error"):
        el = tc.find(tag)
        if el is not None:
            msg = el.get("message") or (el.text or "").strip().splitlines()[-1:] or [""]
            if isinstance(msg, list):
                msg = msg[0]
            prefix = "error in setup/teardown: " if tag == "error" else ""
            return "failed", prefix + one_line(msg)
    el = tc.find("skipped")
    if el is not None:
        msg = el.get("message") or ""
        return "skipped", one_line(msg)
    return "passed", ""


def main():
    out_path, collected_path, *xmls = sys.argv[1:]
    results = {}
    for path in xmls:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            continue
        for tc in root.iter("testcase"):
            nid = node_id(tc)
            status, detail = outcome(tc)
            secs = float(tc.get("time") or 0.0)
            prev = results.get(nid)
            if prev is None:
                results[nid] = [status, secs, detail]
            else:
                prev[1] += secs
                if RANK[status] > RANK[prev[0]]:
                    prev[0], prev[2] = status, detail
    order = []
    with open(collected_path) as f:
        for line in f:
            line = line.strip()
            if line and "::" in line:
                order.append(line)
    for nid in order:
        if nid not in results:
            results[nid] = ["failed", 0.0,
                            "no result: its pytest process hit the outer timeout or crashed"]
    for nid in results:
        if nid not in order:
            order.append(nid)
    with open(out_path, "w") as f:
        for nid in order:
            status, secs, detail = results[nid]
            f.write("%s\t%s\t%.3f\t%s\n" % (nid, status, secs, detail.replace("\t", " ")))
    counts = {}
    for status, _, _ in results.values():
        counts[status] = counts.get(status, 0) + 1
    print("kafka-python results: %s" % ", ".join("%s=%d" % kv for kv in sorted(counts.items())))


if __name__ == "__main__":
    main()
