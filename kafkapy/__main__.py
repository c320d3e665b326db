"""`python -m kafkapy` is the `kafkapy` command."""

from kafkapy.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
