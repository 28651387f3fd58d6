#!/usr/bin/env bash
# Runs every test: unit tests, the reference (golden) tests and the CLI end-to-end tests.
# The reference tree is ../shared/reference, or $EMBER_REFERENCE; tests fail without it.
set -euo pipefail
cd "$(dirname "$0")"
exec cargo test --workspace --locked "$@"
