#!/usr/bin/env bash
# The main job (`make run`): filled in by the cli/reports work.
set -euo pipefail
BUILD=${1:-build}
"$BUILD/cli/ulysses" --help
