# Sourced by .ci/run and the README's commands: puts Node >= 22.19 and pnpm 11 on PATH, installing them from the
# npm registry into .tools/ of this checkout (never system-wide) when the machine does not have them.
TETHER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TETHER_TOOLS="$TETHER_ROOT/.tools"
TETHER_NODE_VERSION=24
TETHER_PNPM_VERSION=11.28.11

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

if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$TETHER_PNPM_VERSION" ]; then
  if [ ! -x "$TETHER_TOOLS/pnpm/bin/pnpm" ]; then
    echo "tether: installing pnpm@$TETHER_PNPM_VERSION from the npm registry into .tools/pnpm" >&2
    npm install --silent --no-audit --no-fund -g --prefix "$TETHER_TOOLS/pnpm" "pnpm@$TETHER_PNPM_VERSION" >&2
  fi
  export PATH="$TETHER_TOOLS/pnpm/bin:$PATH"
fi
