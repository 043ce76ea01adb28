#!/usr/bin/env bash
# Kiln's developer entry point: one command sets up, builds and runs.
#
#   tools/dev.sh main    install what is missing, build, run the main job
#   tools/dev.sh test    install what is missing, build, run every test
#   tools/dev.sh setup   only install the missing Debian packages
#   tools/dev.sh build   setup, then build (build/ by default, $KILN_BUILD_DIR)
#
# Idempotent: quiet when every package is present and the build is current.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${KILN_BUILD_DIR:-$ROOT/build}"
FUZZ_BUILD="${KILN_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
JOBS="${KILN_JOBS:-$(nproc)}"

# Everything Kiln builds and tests with, from Debian's archive.
PACKAGES=(
  cmake ninja-build ccache g++ pkgconf
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  clang-22 libclang-rt-22-dev
  libprotobuf-dev protobuf-compiler libsqlite3-dev libfmt-dev libgtest-dev
  libzip-dev zlib1g-dev libdnnl-dev libssl-dev libcurl4-openssl-dev iproute2
  # oneDNN's CMake package requires OpenCL's headers (its GPU runtime), a
  # Recommends that --no-install-recommends leaves out.
  ocl-icd-opencl-dev
  python3-torch python3-torchvision python3-numpy python3-protobuf python3-dev
  pybind11-dev
  # Debian's torch otherwise runs on the reference BLAS: tracing and the
  # eager comparisons in the tests would be ~20x slower.
  libopenblas0-pthread
  libgloo-dev fortunes-min
  # mpirun, which the distributed tests launch workers with beside torchrun,
  # and etcd with torch's client, an elastic rendezvous they test.
  openmpi-bin etcd-server python3-etcd
  dataset-fashion-mnist
  # The remote cache tiers' tests: nginx's WebDAV (an HTTP tier); Node for
  # the S3-compatible server (TEST_SERVERS).
  nginx-light
)
# Test servers Debian lacks, from npm, into <build>/test-servers.
TEST_SERVERS=(s3rver@3.7.1)

log() { printf 'kiln-dev: %s\n' "$*" >&2; }

setup() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Node and npm may come from elsewhere (NodeSource): any will do.
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

configure() {
  local dir="$1"; shift
  # Always passed, so that an existing tree picks up the settings too.
  cmake -G Ninja -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
}

test_servers() {
  local dir="$BUILD/test-servers"
  [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "${TEST_SERVERS[*]}" ] && return 0
  log "installing test servers from npm: ${TEST_SERVERS[*]}"
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${TEST_SERVERS[@]}" >/dev/null
  echo "${TEST_SERVERS[*]}" > "$dir/.installed"
}

build() {
  setup
  configure "$BUILD" -DKILN_FUZZ_BIN_DIR="$FUZZ_BUILD/bin"
  cmake --build "$BUILD" -j "$JOBS"
}

build_sanitized() {
  # A clang tree under AddressSanitizer: the libFuzzer targets and the unit
  # tests, which the main tree's ctest runs from here.
  CC=clang-22 CXX=clang++-22 configure "$FUZZ_BUILD" -DKILN_ENABLE_FUZZERS=ON -DKILN_ENABLE_ASAN=ON
  cmake --build "$FUZZ_BUILD" -j "$JOBS" --target kiln-fuzz-graph-import kiln-fuzz-artifact-loader kiln-unit-tests kiln-runtime-tests
}

main_job() {
  build
  log "main job: precompile, then 4-worker data-parallel training from the cache (Fashion-MNIST MLP and CNN, fortunes GPT)"
  "$ROOT/examples/pytorch/main_job.sh" "$BUILD"
}

run_tests() {
  build
  test_servers
  build_sanitized
  cd "$BUILD"
  ctest --output-on-failure -j "$JOBS"
}

case "${1:-}" in
  setup) setup ;;
  build) build ;;
  main) main_job ;;
  test) run_tests ;;
  *) echo "usage: tools/dev.sh main|test|setup|build" >&2; exit 2 ;;
esac
