#!/usr/bin/env bash
# npm run lint: Biome (lint rules and the formatter, see biome.json), the layers of src/ by
# dependency-cruiser (no import circle, no import from a higher layer, no orphan: the rules are
# scripts/import-layers.ts), the function lengths on the TypeScript compiler's syntax tree
# (scripts/function-lines.ts), buf lint, and buf breaking against the commit this one builds on:
# on a branch its merge base with main, on main the previous commit. A clone without that history (shallow) skips only the breaking check, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

npx biome check .
npx depcruise --config scripts/import-layers.ts src
node scripts/function-lines.ts
npx buf lint

base=""
if git rev-parse --verify -q main >/dev/null && [ "$(git rev-parse HEAD)" != "$(git rev-parse main)" ]; then
  base="$(git merge-base HEAD main)"
elif git rev-parse --verify -q HEAD~1 >/dev/null; then
  base="$(git rev-parse HEAD~1)"
fi
if [ -n "$base" ]; then
  npx buf breaking --against ".git#ref=$base"
  echo "lint: biome, the layers, the function lengths, buf lint and buf breaking (against ${base:0:12}) passed"
else
  echo "lint: biome, the layers, the function lengths and buf lint passed; buf breaking skipped (no earlier commit in this clone)"
fi
