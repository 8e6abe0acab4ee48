#!/usr/bin/env bash
# npm run lint: Biome (lint rules and the formatter, see biome.json), the import check (no import
# circle in src/, no import from a higher layer: scripts/check-imports.ts), the function lengths
# (scripts/function-lengths.ts), buf lint, and buf
# breaking against the commit this one builds on: on a branch its merge base with main, on main
# the previous commit. A clone without that history (shallow) skips only the breaking check, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

npx biome check .
node scripts/check-imports.ts
node scripts/function-lengths.ts
npx buf lint

base=""
if git rev-parse --verify -q main >/dev/null && [ "$(git rev-parse HEAD)" != "$(git rev-parse main)" ]; then
  base="$(git merge-base HEAD main)"
elif git rev-parse --verify -q HEAD~1 >/dev/null; then
  base="$(git rev-parse HEAD~1)"
fi
if [ -n "$base" ]; then
  npx buf breaking --against ".git#ref=$base"
  echo "lint: biome, the import check, buf lint and buf breaking (against ${base:0:12}) passed"
else
  echo "lint: biome, the import check and buf lint passed; buf breaking skipped (no earlier commit in this clone)"
fi
