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

# `tether_npm_install WHAT REMEDY ARGS...`: `npm install ARGS...`, quiet when it works; when it fails, what failed,
# npm's own error (the tail of its output), the registry it used, and what to do instead.
tether_npm_install() {
  local what="$1" remedy="$2" log status
  shift 2
  if ! command -v npm >/dev/null 2>&1; then
    echo "tether: cannot install $what: there is no npm on PATH. $remedy" >&2
    return 1
  fi
  log="$(mktemp "${TMPDIR:-/tmp}/tether-npm-XXXXXX")"
  # Few and short retries: without a network npm's defaults take over a minute to give up.
  if npm install --no-audit --no-fund --loglevel=error --fetch-retries=1 --fetch-retry-maxtimeout=10000 "$@" \
    >"$log" 2>&1; then
    rm -f "$log"
    return 0
  else
    status=$?
  fi
  echo "tether: installing $what from the npm registry ($(npm config get registry 2>/dev/null)) failed:" \
    "npm exited $status. npm said:" >&2
  tail -n 25 "$log" | sed 's/^/  /' >&2
  rm -f "$log"
  echo "tether: $remedy" >&2
  return 1
}

if ! tether_node_ok; then
  if [ ! -x "$TETHER_TOOLS/node24/node_modules/.bin/node" ]; then
    echo "tether: installing node@$TETHER_NODE_VERSION from the npm registry into .tools/node24" \
      "(the Node on PATH is $(node --version 2>/dev/null || echo missing); 22.19 or later is needed)" >&2
    tether_npm_install "node@$TETHER_NODE_VERSION" \
      "Check the network or the registry (npm config set registry URL, or HTTPS_PROXY), or install Node 22.19 or later yourself, put it on PATH, and run this again." \
      --prefix "$TETHER_TOOLS/node24" "node@$TETHER_NODE_VERSION" || { return 1 2>/dev/null || exit 1; }
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
    tether_npm_install "pnpm@$TETHER_PNPM_VERSION" \
      "Check the network or the registry (npm config set registry URL, or HTTPS_PROXY), or install pnpm $TETHER_PNPM_VERSION yourself (npm install -g pnpm@$TETHER_PNPM_VERSION), put it on PATH, and run this again." \
      -g --prefix "$TETHER_TOOLS/pnpm" "pnpm@$TETHER_PNPM_VERSION" || { return 1 2>/dev/null || exit 1; }
  fi
  export PATH="$TETHER_TOOLS/pnpm/bin:$PATH"
fi
