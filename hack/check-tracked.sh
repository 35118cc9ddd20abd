#!/usr/bin/env bash
# check-tracked.sh — refuse tracked files that are build outputs: any file over
# 1 MiB, and any ELF binary, whatever its size (make verify runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt 1048576 ]; then
    echo "tracked file over 1 MiB: $f ($size bytes)"; bad=1
  fi
  if [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
    echo "tracked ELF binary: $f"; bad=1
  fi
done < <(git ls-files -z)
[ "$bad" = 0 ] || { echo "remove them from git (git rm --cached) and ignore them"; exit 1; }
