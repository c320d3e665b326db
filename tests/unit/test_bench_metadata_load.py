"""benchmarks.metadata_load runs its in-memory broker and controller against the real metadata
and replica-manager code, so it breaks quietly when those grow: every section runs here at a
tiny size (the timings are not looked at)."""

from __future__ import annotations

from benchmarks import metadata_load


def test_every_section_runs_at_a_tiny_size(capsys):
    assert metadata_load.main(["--sizes", "200", "--runs", "1", "--no-save"]) == 0
    out = capsys.readouterr().out
    # One row of 200 partitions per section's table.
    assert out.count("| 200 |") == len(metadata_load.SECTIONS), out
