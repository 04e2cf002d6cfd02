#!/bin/bash
# Fails when Cargo.lock holds a crate Strata must not depend on again (issue 23): the retired
# Azure SDK (azure_mgmt_*, azure_core / azure_identity 0.x) and what it brought with it that is
# reported vulnerable or unmaintained (http-types, rand 0.7, instant, paste). `make lint` runs it.
# Usage: bash e2e/check-dependencies.sh [Cargo.lock]
set -euo pipefail
lock=${1:-Cargo.lock}
found=$(awk '
  /^\[\[package\]\]/ { name = ""; version = "" }
  /^name = /    { gsub(/"/, "", $3); name = $3 }
  /^version = / { gsub(/"/, "", $3); version = $3
    if (name ~ /^azure_mgmt_/ \
        || ((name == "azure_core" || name == "azure_identity") && version ~ /^0\./) \
        || name == "http-types" || name == "instant" || name == "paste" \
        || (name == "rand" && version ~ /^0\.7\./)) print "  " name " " version
  }' "$lock")
if [ -n "$found" ]; then
  echo "$lock holds crates Strata keeps out (see e2e/check-dependencies.sh):" >&2
  echo "$found" >&2
  exit 1
fi
echo "$lock: no retired Azure SDK crates, no http-types, rand 0.7, instant or paste"
