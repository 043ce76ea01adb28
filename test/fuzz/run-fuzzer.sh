#!/usr/bin/env bash
# Runs a fuzzer for a bounded time, seeded with real inputs: graphs for the
# graph importer, artifacts of the example kisa programs for the loader.
#   run-fuzzer.sh FUZZER SECONDS KILN_BIN_DIR KILN_SOURCE_DIR
set -euo pipefail
fuzzer="$(realpath -m "$1")" seconds="$2" bin="$(realpath -m "$3")" src="$(realpath -m "$4")"
if [ ! -x "$fuzzer" ]; then
  echo "fuzzer '$fuzzer' is not built (tools/dev.sh test builds it with clang-22); skipping"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
case "$(basename "$fuzzer")" in
  kiln-fuzz-graph-import)
    "$bin/kiln-example-mlp" --emit-graph "$work/corpus/mlp.kgraph.pb" --batch 4 --hidden 8
    "$bin/kiln" export "$src/test/compiler/graph/roundtrip.mlir" -o "$work/corpus/roundtrip.kgraph.pb"
    ;;
  *)
    # Compressed streams, as the compiler writes them, and plain ones, whose
    # mutations reach the instruction validation behind the decompression.
    for program in "$src"/examples/kisa/*.mlir; do
      name="$work/corpus/$(basename "$program" .mlir)"
      "$bin/kiln" assemble "$program" -o "$name.kneff"
      "$bin/kiln" assemble "$program" --plain-streams -o "$name.plain.kneff"
    done
    ;;
esac
cd "$work"
# See test/CMakeLists.txt: LLVM's allocator annotations are a false positive
# when only Kiln's code is instrumented.
export ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# A crashing input outlives the scratch directory, next to the binaries, and
# the report's stack trace stays in the test log.
crashes="$bin/../fuzz-crashes"
mkdir -p "$crashes"
status=0
# libFuzzer's default exit status for a finding, 77, is ctest's "skipped".
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 -error_exitcode=1 \
  -artifact_prefix="$crashes/$(basename "$fuzzer")-" -print_final_stats=1 \
  "$work/corpus" > "$work/log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  grep -v '^\[libprotobuf' "$work/log" | grep -A 40 -m 1 'ERROR:' || true
  echo "crashing input kept in $crashes"
fi
tail -n 8 "$work/log"
exit "$status"
