# Sourced by ./run (which .ci/run and the README's commands go through): puts Node >= 22.19 and the pnpm that
# package.json's packageManager pins on PATH. Node 24 is installed from the npm registry into .tools/node24 of this
# checkout (never system-wide) when the Node on PATH is missing or older than 22.19; pnpm into .tools/pnpm whenever
# the pnpm on PATH is not exactly the pinned version.
TETHER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TETHER_TOOLS="$TETHER_ROOT/.tools"
TETHER_NODE_VERSION=24

tether_node_ok() {
  command -v node >/dev/null 2>&1 || return 1
  node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=19)?0:1)'
}

if ! tether_node_ok; then
  if [ ! -x "$TETHER_TOOLS/node24/node_modules/.bin/node" ]; then
    echo "tether: installing node@$TETHER_NODE_VERSION from the npm registry into .tools/node24" >&2
    npm install --silent --no-audit --no-fund --prefix "$TETHER_TOOLS/node24" "node@$TETHER_NODE_VERSION" >&2
  fi
  export PATH="$TETHER_TOOLS/node24/node_modules/.bin:$PATH"
fi

# "packageManager": "pnpm@<version>[+<hash>]" in package.json is the one place pnpm's version is kept.
TETHER_PNPM_VERSION="$(node -e '
const spec = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).packageManager ?? ""
const match = /^pnpm@([0-9]+\.[0-9]+\.[0-9]+[^+]*)(\+.*)?$/.exec(spec)
if (match === null) process.exit(1)
process.stdout.write(match[1])
' "$TETHER_ROOT/package.json")" || {
  echo "tether: cannot read pnpm's version from package.json (\"packageManager\": \"pnpm@<version>\")" >&2
  return 1 2>/dev/null || exit 1
}

if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$TETHER_PNPM_VERSION" ]; then
  if [ "$("$TETHER_TOOLS/pnpm/bin/pnpm" --version 2>/dev/null)" != "$TETHER_PNPM_VERSION" ]; then
    echo "tether: installing pnpm@$TETHER_PNPM_VERSION from the npm registry into .tools/pnpm" >&2
    npm install --silent --no-audit --no-fund -g --prefix "$TETHER_TOOLS/pnpm" "pnpm@$TETHER_PNPM_VERSION" >&2
  fi
  export PATH="$TETHER_TOOLS/pnpm/bin:$PATH"
fi
