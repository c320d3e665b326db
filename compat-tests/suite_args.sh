# Shared by the suites' run.sh; sourced, not run: . "$ROOT/compat-tests/suite_args.sh" "$@"
# reads the run.sh arguments (<quick|full> <bootstrap> <results.tsv>, or setup) into MODE,
# BOOTSTRAP and RESULTS (made absolute: the suites run their tests from other folders).
MODE=${1:?usage: run.sh <quick|full> <bootstrap> <results.tsv> | run.sh setup}
case "$MODE" in quick|full|setup) ;; *) echo "mode must be quick, full or setup" >&2; exit 2 ;; esac
if [ "$MODE" != setup ]; then
    BOOTSTRAP=${2:?bootstrap host:port}
    RESULTS=${3:?results.tsv}
    RESULTS=$(cd "$(dirname "$RESULTS")" && pwd)/$(basename "$RESULTS")
fi
