"""Generated blocks in shared Markdown pages: each generator rewrites only its own block."""

from kafkapy.testing.doc_blocks import replace_block, write_block


def test_replacing_one_block_keeps_the_others_and_the_text_around():
    page = replace_block("# Title\n\nhand-written\n", "suites", "| a | 1 |")
    page = replace_block(page, "differential", "60 scenarios")
    page = replace_block(page, "suites", "| a | 2 |")
    assert page.startswith("# Title\n\nhand-written\n")
    assert "| a | 2 |" in page and "| a | 1 |" not in page
    assert "60 scenarios" in page
    assert page.index("<!-- suites:start -->") < page.index("<!-- differential:start -->")


def test_a_missing_file_is_created_with_the_block(tmp_path):
    path = tmp_path / "page.md"
    write_block(path, "tools", "kafka-topics: same")
    write_block(path, "tools", "kafka-topics: differs")
    assert path.read_text() == "<!-- tools:start -->\nkafka-topics: differs\n<!-- tools:end -->\n"
