#!/usr/bin/env bash
# Runs a test binary from another build tree, or skips (77) when it is absent.
set -euo pipefail
if [ ! -x "$1" ]; then
  echo "'$1' is not built (tools/dev.sh test builds it); skipping"
  exit 77
fi
exec "$@"
