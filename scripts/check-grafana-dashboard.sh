#!/usr/bin/env bash
# Checks docs/grafana/iodig-dashboard.json (or the file given) against Grafana's own
# dashboard schema: the TypeScript types of @grafana/schema, which Grafana generates
# from its CUE dashboard kind and panel plugin schemas, type-checked by tsc in strict
# mode. Installs the two pinned npm packages once into a cache outside the repository.
#
#   scripts/check-grafana-dashboard.sh [DASHBOARD.json]
#
# Exit: 0 valid, 1 schema errors (each printed), 2 bad usage or install failure,
# 3 npm/node missing (nothing checked).
set -euo pipefail

GRAFANA_SCHEMA_VERSION=13.2.3   # @grafana/schema, the schema of Grafana 13.2
TYPESCRIPT_VERSION=5.9.3

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
dash="${1:-$repo/docs/grafana/iodig-dashboard.json}"
shown="${dash#"$repo"/}"

if [ ! -f "$dash" ]; then
  echo "FAIL $shown: no such file" >&2
  exit 2
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "NOT CHECKED $shown: $tool is not installed (the check needs node and npm to install @grafana/schema and typescript)" >&2
    exit 3
  fi
done

cache="${IODIG_GRAFANA_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iodig/grafana-check}"
prefix="$cache/schema-$GRAFANA_SCHEMA_VERSION-ts-$TYPESCRIPT_VERSION"
if [ ! -x "$prefix/node_modules/.bin/tsc" ] || [ ! -f "$prefix/node_modules/@grafana/schema/package.json" ]; then
  mkdir -p "$prefix"
  if ! npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error \
      "@grafana/schema@$GRAFANA_SCHEMA_VERSION" "typescript@$TYPESCRIPT_VERSION" >"$prefix/npm-install.log" 2>&1; then
    echo "FAIL $shown: could not install @grafana/schema@$GRAFANA_SCHEMA_VERSION and typescript@$TYPESCRIPT_VERSION (see $prefix/npm-install.log)" >&2
    exit 2
  fi
fi

work="$(mktemp -d "$prefix/run.XXXXXX")"
trap 'rm -rf "$work"' EXIT
if ! node "$here/grafana-check/gen-check.mjs" "$dash" "$work/check.ts" 2>"$work/gen.err"; then
  echo "FAIL $shown: not readable as JSON: $(head -n 3 "$work/gen.err" | tr '\n' ' ')"
  exit 1
fi
cat >"$work/tsconfig.json" <<JSON
{
  "compilerOptions": {
    "strict": true, "noEmit": true, "target": "es2022", "module": "esnext",
    "moduleResolution": "bundler", "skipLibCheck": true, "types": [],
    "typeRoots": ["$prefix/node_modules/@types"],
    "paths": { "@grafana/schema": ["$prefix/node_modules/@grafana/schema"],
               "@grafana/schema/*": ["$prefix/node_modules/@grafana/schema/*"] }
  },
  "files": ["check.ts"]
}
JSON
"$prefix/node_modules/.bin/tsc" -p "$work/tsconfig.json" --pretty false >"$work/tsc.out" 2>&1 || true
node "$here/grafana-check/report.mjs" "$shown" "$work/check.ts" "$work/tsc.out"
