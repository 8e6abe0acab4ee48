#!/usr/bin/env bash
# The README's test command on a machine that has Node and the package registries and nothing
# else, simulated on this one: a clean clone of a commit (default HEAD), run in a private mount
# namespace where PostgreSQL's server binaries, Go, any temporal CLI and the gateway's own caches
# are hidden behind empty folders, with an empty home folder. Then `npm ci && npm test` must
# pass with 0 failed and 0 skipped.
#
#   scripts/fresh-machine-test.sh [commit]        (as root: it uses unshare -m and bind mounts)
#
# Node itself stays reachable (the node on PATH, >= the project's minimum). Everything the run
# fetches (npm packages, PostgreSQL binaries, the Temporal CLI) lands in the throwaway home
# folder and in empty folders mounted over the gateway's root caches, and is gone afterwards.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
commit="$(git -C "$repo" rev-parse "${1:-HEAD}")"

if [ "$(id -u)" != 0 ]; then echo "fresh-machine-test: needs root (a mount namespace hides the system's binaries)" >&2; exit 2; fi
command -v unshare >/dev/null || { echo "fresh-machine-test: needs unshare (util-linux)" >&2; exit 2; }
node "$repo/scripts/node-check.mjs"
node_dir="$(dirname "$(command -v node)")"

work="$(mktemp -d /tmp/fresh-machine-XXXXXX)"
trap 'rm -rf "$work"' EXIT
git clone --quiet --no-hardlinks "$repo" "$work/clone"
git -C "$work/clone" -c advice.detachedHead=false checkout --quiet "$commit"
mkdir -p "$work/home" "$work/empty"
echo "fresh-machine-test: commit $commit in $work/clone, node $(node --version) from $node_dir"

# What a fresh machine does not have. Folders that do not exist are made (empty) first, so that
# whatever the run writes there lands in the namespace's empty folder, not on this machine.
hidden=(
  /usr/lib/postgresql            # Debian's PostgreSQL server binaries (/usr/local/bin/initdb points in here)
  /usr/local/go /root/go         # Go
  /root/.cache/gateway-ci/temporal
  /var/cache/metered-ai-gateway  # the gateway's caches as root: PostgreSQL binaries
  /var/lib/metered-ai-gateway    # and clusters it keeps for folders out of the server user's reach
)
for d in /var/cache/metered-ai-gateway /var/lib/metered-ai-gateway; do mkdir -p "$d"; done

export WORK="$work" NODE_DIR="$node_dir" HIDDEN="${hidden[*]}"
status=0
unshare -m --propagation private bash -euo pipefail -c '
  for d in $HIDDEN; do
    [ -d "$d" ] || continue
    mkdir -p "$WORK/empty${d}"
    mount --bind "$WORK/empty${d}" "$d"
  done
  export HOME="$WORK/home" PATH="$NODE_DIR:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  unset XDG_CACHE_HOME TEMPORAL_CLI TEMPORAL_ADDRESS GOPATH GOROOT DATABASE_URL npm_config_cache
  # The machine is as described, or the check means nothing.
  for exe in initdb postgres go temporal; do
    if command -v "$exe" >/dev/null; then echo "fresh-machine-test: $exe is still reachable ($(command -v "$exe"))" >&2; exit 3; fi
  done
  [ -z "$(ls -A /usr/lib/postgresql 2>/dev/null)" ] || { echo "fresh-machine-test: /usr/lib/postgresql is not hidden" >&2; exit 3; }
  [ -z "$(ls -A "$HOME")" ] || { echo "fresh-machine-test: HOME is not empty" >&2; exit 3; }
  echo "fresh-machine-test: no initdb, postgres, go or temporal reachable; HOME=$HOME is empty"
  cd "$WORK/clone"
  npm ci --no-audit --no-fund
  npm test 2>&1 | tee "$WORK/test.log"
' || status=$?
summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$work/test.log" 2>/dev/null | tail -1 || true)"
echo "fresh-machine-test: ${summary:-no test summary}"
case "$status:$summary" in
  "0:"*" passed, 0 failed, 0 skipped") echo "fresh-machine-test: OK" ;;
  *) echo "fresh-machine-test: FAILED (exit $status; expected 0 failed, 0 skipped)" >&2; exit 1 ;;
esac
