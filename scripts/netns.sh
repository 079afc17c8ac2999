#!/usr/bin/env bash
# Runs a command inside a fresh network namespace that has only loopback (brought up), so nothing it does can
# reach another machine: a regression in the CLI's offline behaviour then fails loudly instead of leaking.
#
#   scripts/netns.sh pnpm --silent --filter @tether/examples demo
#
# The claude-cli vitest project (packages/transport-node/test/integration) starts each of its workers through it.
#
# Needs root (or user namespaces for `unshare -rn`). If no namespace can be made, it warns loudly on stderr and
# runs the command directly; set TETHER_NETNS_REQUIRED=1 to fail instead. Exit status is the command's.
set -euo pipefail

if [ "$#" -eq 0 ]; then
  echo "usage: $0 <command> [args...]" >&2
  exit 2
fi

# Brings lo up inside the new namespace, with whichever tool the machine has, then execs the command.
# shellcheck disable=SC2016
inner='
if command -v ip >/dev/null 2>&1; then
  ip link set lo up
elif command -v ifconfig >/dev/null 2>&1; then
  ifconfig lo 127.0.0.1 up
else
  echo "netns.sh: neither ip nor ifconfig found: cannot bring loopback up" >&2
  exit 97
fi
exec "$@"
'

if command -v unshare >/dev/null 2>&1; then
  # Probe first, so a refusal to create the namespace is told apart from the command's own failure.
  if unshare -n true 2>/dev/null; then
    exec unshare -n sh -c "$inner" netns "$@"
  fi
  # Without root, a user namespace maps us to root inside and allows a network namespace (where permitted).
  if unshare -rn true 2>/dev/null; then
    exec unshare -rn sh -c "$inner" netns "$@"
  fi
fi

if [ "${TETHER_NETNS_REQUIRED:-0}" = "1" ]; then
  echo "netns.sh: cannot create a network namespace (unshare -n / -rn refused) and TETHER_NETNS_REQUIRED=1" >&2
  exit 98
fi
{
  echo "################################################################################"
  echo "## netns.sh WARNING: cannot create a network namespace (unshare -n / -rn refused)."
  echo "## Running WITHOUT network isolation: the command can reach the network."
  echo "################################################################################"
} >&2
exec "$@"
