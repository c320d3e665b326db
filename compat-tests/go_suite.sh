# Shared by the Go client suites' run.sh (franz-go, kafka-go); sourced, not run:
#   SUITE=<name>; . "$HERE/../go_suite.sh" "$@"
# reads the run.sh arguments (<quick|full> <bootstrap> <results.tsv>, or setup) into MODE, BOOTSTRAP
# and RESULTS, and sets ROOT, CACHE (.tools/suites/<name>), PY and log().
#
# go_suite_setup <module> <version> <package> <package dir> [gotest_glue.py list options...]
#   fetches <module>@<version> from the Go module proxy into $CACHE/gomod (its own module cache),
#   copies it to $CACHE/src (the module cache is read-only), builds the package's test binary
#   ($CACHE/suite.test) and test2json ($CACHE/test2json), and lists the package's broker tests
#   ($CACHE/tests.txt). Everything is cached: a second call with the same version does nothing.
# go_suite_run <seconds per test> <regexp of tests to leave out> <results.tsv> [<regexp of tests to
#              take> <id suffix>]
#   runs each listed test in its own process of the test binary, under its own deadline, in the
#   package's folder (tests read testdata/ relative to it), and writes results.tsv. With
#   KAFKAPY_SUITE_ONLY=<file of test names>, only the listed tests run (and are in results.tsv;
#   an empty one when none of them is here). A suffix (e.g. @SSL) makes this a second pass of some
#   tests in another setting (the caller's environment): results.tsv names them <test><suffix>, and
#   of KAFKAPY_SUITE_ONLY's ids it takes those ending in the suffix.
# go_suite_package <name> <package> <package dir> [gotest_glue.py list options...]
#   (after go_suite_setup) one more package of the module whose tests dial a broker, e.g. a
#   subpackage: builds its test binary ($CACHE/<name>.test, cached as the first) and adds its broker
#   tests to $CACHE/tests.txt as <name>.<Test>, the id they have in results.tsv. go_suite_run runs
#   them with that binary in that folder, with GO_SUITE_ENV[<name>] (VAR=value words, optional)
#   added to their environment.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=suite_args.sh
. "$ROOT/compat-tests/suite_args.sh" "$@"
CACHE="$ROOT/.tools/suites/$SUITE"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
log() { echo "[$SUITE] $*" >&2; }

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
# One module cache per suite (the pinned versions of its dependencies); one build cache shared by
# the Go suites, so the standard library is compiled once.
export GOMODCACHE="$CACHE/gomod" GOCACHE="$ROOT/.tools/suites/go-build"
export GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0

go_suite_setup() {
    local module=$1 version=$2 pkg=$3 pkgdir=$4
    shift 4
    GO_PKGDIR=$pkgdir GO_MODULE_VERSION=$version
    local stamp="$CACHE/built-$version"
    if [ -f "$stamp" ] && [ -x "$CACHE/suite.test" ] && [ -x "$CACHE/test2json" ]; then
        go_suite_list "$@"
        return 0
    fi
    [ -x "$GO" ] || { log "setup failed: no go command (looked for go on PATH and /usr/local/go/bin/go)"; exit 3; }
    mkdir -p "$CACHE"
    rm -f "$CACHE"/built-*
    local t0=$SECONDS dir
    log "go mod download $module@$version ($("$GO" env GOVERSION))"
    dir=$(cd "$CACHE" && timeout 600 "$GO" mod download -json "$module@$version" \
          | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] && [ -d "$dir" ] || { log "setup failed: go mod download $module@$version"; exit 3; }
    rm -rf "$CACHE/src" "$CACHE/src.tmp"
    cp -r "$dir" "$CACHE/src.tmp" && chmod -R u+w "$CACHE/src.tmp"
    mv "$CACHE/src.tmp" "$CACHE/src"
    (cd "$CACHE/src" && timeout 600 "$GO" mod download) \
        || { log "setup failed: go mod download (dependencies of $module)"; exit 3; }
    local t1=$SECONDS
    log "go test -c $pkg (the test binary; a few minutes on two cores)"
    (cd "$CACHE/src" && timeout 1800 "$GO" test -c -o "$CACHE/suite.test" "$pkg") \
        > "$CACHE/build.log" 2>&1 || { cat "$CACHE/build.log" >&2; log "setup failed: go test -c"; exit 3; }
    timeout 900 "$GO" build -o "$CACHE/test2json" cmd/test2json >> "$CACHE/build.log" 2>&1 \
        || { cat "$CACHE/build.log" >&2; log "setup failed: go build cmd/test2json"; exit 3; }
    go_suite_list "$@"
    log "setup done: download $((t1 - t0)) s, build $((SECONDS - t1)) s; $(wc -l < "$CACHE/tests.txt") broker tests"
    echo "download_s=$((t1 - t0)) build_s=$((SECONDS - t1))" > "$stamp"
}

declare -A GO_PKG_DIRS=() GO_SUITE_ENV=()

go_suite_package() {
    local name=$1 pkg=$2 pkgdir=$3
    shift 3
    GO_PKG_DIRS[$name]=$pkgdir
    # go_suite_setup removes every built-* stamp when it builds afresh: this one goes with them.
    local stamp="$CACHE/built-$name-$GO_MODULE_VERSION"
    if [ ! -f "$stamp" ] || [ ! -x "$CACHE/$name.test" ]; then
        local t0=$SECONDS
        log "go test -c $pkg"
        (cd "$CACHE/src" && timeout 1800 "$GO" test -c -o "$CACHE/$name.test" "$pkg") \
            > "$CACHE/build-$name.log" 2>&1 \
            || { cat "$CACHE/build-$name.log" >&2; log "setup failed: go test -c $pkg"; exit 3; }
        echo "build_s=$((SECONDS - t0))" > "$stamp"
    fi
    local tests
    tests=$("$PY" "$ROOT/compat-tests/gotest_glue.py" list "$CACHE/src/$pkgdir" "$@")
    [ -n "$tests" ] || { log "setup failed: no broker tests found in $pkgdir"; exit 3; }
    sed "s/^/$name./" <<< "$tests" >> "$CACHE/tests.txt"
}

# The broker tests, listed afresh each time (a second): the selection follows run.sh's options.
go_suite_list() {
    "$PY" "$ROOT/compat-tests/gotest_glue.py" list "$CACHE/src/$GO_PKGDIR" "$@" > "$CACHE/tests.txt"
    [ -s "$CACHE/tests.txt" ] || { log "setup failed: no broker tests found in $GO_PKGDIR"; exit 3; }
}

go_suite_run() {
    local per_test=$1 skip=$2 results=$3 take=${4:-.} suffix=${5:-} run budget
    run="$CACHE/last-run$suffix"
    # KAFKAPY_SUITE_ONLY (a file of test names, one a line): run exactly those of the listed broker
    # tests, the skip regexp notwithstanding (the report card's re-run of allowed tests that
    # failed), with their raw output beside the full run's rather than over it.
    if [ -n "${KAFKAPY_SUITE_ONLY:-}" ]; then run="$run-only"; fi
    rm -rf "$run" && mkdir -p "$run"
    if [ -n "${KAFKAPY_SUITE_ONLY:-}" ]; then
        grep -Fxf <(sed 's/[[:space:]]*$//' "$KAFKAPY_SUITE_ONLY" | grep . \
                    | awk -v s="$suffix" 's == "" { print; next }
                          length($0) > length(s) && substr($0, length($0) - length(s) + 1) == s {
                              print substr($0, 1, length($0) - length(s)) }') \
            "$CACHE/tests.txt" > "$run/tests.txt" || true
        # A re-run of another pass's tests only: nothing to do here.
        if [ ! -s "$run/tests.txt" ]; then
            log "none of KAFKAPY_SUITE_ONLY's tests${suffix:+ ($suffix)} here"; : > "$results"; return 0
        fi
    else
        grep -E "$take" "$CACHE/tests.txt" | grep -Ev "$skip" > "$run/tests.txt" || true
    fi
    [ -s "$run/tests.txt" ] || { log "no tests selected"; exit 3; }
    # Inside the harness's own suite timeout (30 min quick), so results.tsv is always written.
    budget=$(( $(wc -l < "$run/tests.txt") * per_test ))
    [ "$budget" -gt 1500 ] && [ "$per_test" -le 300 ] && budget=1500
    local started=$SECONDS t left pkg name dir binary
    local -a extra_env
    while IFS= read -r t; do
        left=$(( budget - (SECONDS - started) ))
        [ "$left" -gt "$per_test" ] && left=$per_test
        if [ "$left" -lt 20 ]; then log "$t: the run's ${budget}s budget is spent"; continue; fi
        log "$t (deadline ${left}s)"
        # <name>.<Test>: a test of a package added with go_suite_package.
        pkg=suite name=$t dir=$GO_PKGDIR binary="$CACHE/suite.test" extra_env=()
        if [[ "$t" == *.* ]]; then
            pkg=${t%%.*} name=${t#*.} dir=${GO_PKG_DIRS[${t%%.*}]:-.} binary="$CACHE/${t%%.*}.test"
            read -ra extra_env <<< "${GO_SUITE_ENV[$pkg]:-}"
        fi
        # -test.timeout makes the binary dump its goroutines before timeout(1) has to kill it.
        # test2json's -p names the package in every event: gotest_glue.py tsv qualifies the test
        # names of packages other than "suite" with it.
        (cd "$CACHE/src/$dir" && env "${extra_env[@]}" timeout -k 10 "$left" "$CACHE/test2json" -t -p "$pkg" \
            "$binary" -test.v=test2json -test.count=1 -test.run "^${name}\$" \
            -test.timeout "$((left - 5))s" > "$run/$t.json" 2> "$run/$t.err" < /dev/null) || true
    done < "$run/tests.txt"
    "$PY" "$ROOT/compat-tests/gotest_glue.py" tsv "$results" "$run/tests.txt" "$run"/*.json \
        || { log "writing $results failed"; exit 3; }
    if [ -n "$suffix" ]; then
        awk -v s="$suffix" 'BEGIN { FS = OFS = "\t" } NF { $1 = $1 s } { print }' "$results" \
            > "$results.tmp" && mv "$results.tmp" "$results"
    fi
    log "$(cut -f2 "$results" | sort | uniq -c | tr '\n' ' ')-> $results (raw output in $run)"
}
